package state

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Health describes a store's namespace. Status is "ok", or "error: " and the
// reason when the backend could not be read (the counts are then zero).
type Health struct {
	Status    string
	Backend   string
	Namespace string
	Uptime    time.Duration
	// Keys counts live key-value entries.
	Keys int64
	// Runs counts workflow runs of every status; RunsByStatus splits them.
	Runs         int64
	RunsByStatus map[Status]int64
	// Leases counts live leases, Sessions live sessions, Events stored
	// history entries.
	Leases   int64
	Sessions int64
	Events   int64
	// Version is the library's version.
	Version string
}

// OK reports whether the backend answered.
func (h Health) OK() bool { return h.Status == "ok" }

// Health counts what the namespace holds. A backend failure is reported in
// Status, not as an error, so that a health endpoint can always answer; the
// error is returned too for callers who want it.
func (s *Store) Health(ctx context.Context) (Health, error) {
	h := Health{Backend: s.Backend(), Namespace: s.ns, Uptime: time.Since(s.c.started),
		RunsByStatus: map[Status]int64{}, Version: Version}
	for _, st := range Statuses {
		h.RunsByStatus[st] = 0
	}
	err := s.health(ctx, &h)
	if err != nil {
		h.Status = "error: " + err.Error()
		return h, wrap("health", "", err)
	}
	h.Status = "ok"
	return h, nil
}

func (s *Store) health(ctx context.Context, h *Health) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	_, now := s.now()
	c, err := s.c.drv.Count(ctx, &backend.CountQuery{NS: s.ns, Now: now,
		Prefixes: []string{layout.KVPrefix, layout.LeasePrefix, layout.SessionPrefix}})
	if err != nil {
		return err
	}
	h.Keys, h.Leases, h.Sessions, h.Events = c.Prefixes[0], c.Prefixes[1], c.Prefixes[2], c.Events
	// Runs are counted by status as they change (see internal/layout), so
	// counting them reads five records however many runs there are.
	counters := layout.Counters
	keys := make([]string, len(counters))
	for i, c := range counters {
		keys[i] = layout.StatusCount(c)
	}
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: keys, Now: now})
	if err != nil {
		return err
	}
	n := map[string]int64{}
	for i, c := range counters {
		if n[c], err = countOf(recs[i]); err != nil {
			return err
		}
	}
	h.RunsByStatus[StatusCreated] = n[layout.Unstarted] - n[layout.Claimed]
	h.RunsByStatus[StatusClaimed] = n[layout.Claimed]
	for _, st := range []Status{StatusWaiting, StatusRunning, StatusDone, StatusFailed} {
		h.RunsByStatus[st] = n[string(st)]
	}
	for _, c := range layout.Buckets {
		h.Runs += n[c]
	}
	return nil
}

// countOf reads a counter record; an absent one is 0.
func countOf(r backend.Record) (int64, error) {
	if !r.Live() {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stored counter %s is corrupt: %q", r.Key, r.Value)
	}
	return n, nil
}

// Ping checks that the store can serve writes now, cheaply enough for a
// readiness probe (unlike Health, which counts). A backend that can tell
// (backend.Pinger; SQLite: can the write lock be had within a short bound)
// is asked; otherwise one point read checks that it answers. A busy backend
// gives an error matching ErrUnavailable.
func (s *Store) Ping(ctx context.Context) error {
	done, err := s.enter()
	if err != nil {
		return wrap("ping", "", err)
	}
	defer done()
	if s.c.drv.pinger != nil {
		return wrap("ping", "", s.c.drv.Ping(ctx))
	}
	_, now := s.now()
	_, err = s.c.drv.Get(ctx, s.ns, "ping", now) // no key lives outside the layout's prefixes
	if err == nil || isNotFound(err) {
		return nil
	}
	return wrap("ping", "", err)
}

// Reset wipes everything in the store's namespace (entries, runs, leases,
// sessions and history) in one atomic step and returns how many records it
// cleared: entries, runs, step outputs, leases, sessions, idempotency keys,
// effects (Once) and history entries, expired ones included. Lease fences keep increasing after a Reset.
func (s *Store) Reset(ctx context.Context) (int64, error) {
	done, err := s.enter()
	if err != nil {
		return 0, wrap("reset", "", err)
	}
	defer done()
	r, err := s.c.drv.Reset(ctx, &backend.ResetQuery{NS: s.ns, CountPrefixes: []string{
		layout.KVPrefix, layout.RunPrefix, layout.OutputPrefix, layout.LeasePrefix, layout.SessionPrefix,
		layout.IdemPrefix, layout.EffectPrefix}})
	if err != nil {
		return 0, wrap("reset", "", err)
	}
	s.c.hub.reset(s.ns)
	return r.Records + r.Events, nil
}
