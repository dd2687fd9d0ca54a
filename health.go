package state

import (
	"context"
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
	prefixes := []string{layout.KVPrefix, layout.RunPrefix, layout.LeasePrefix, layout.SessionPrefix}
	for _, st := range Statuses {
		prefixes = append(prefixes, layout.StatusIndex(string(st)))
	}
	_, now := s.now()
	c, err := s.c.drv.Count(ctx, &backend.CountQuery{NS: s.ns, Prefixes: prefixes, Now: now})
	if err != nil {
		return err
	}
	h.Keys, h.Runs, h.Leases, h.Sessions = c.Prefixes[0], c.Prefixes[1], c.Prefixes[2], c.Prefixes[3]
	for i, st := range Statuses {
		h.RunsByStatus[st] = c.Prefixes[4+i]
	}
	h.Events = c.Events
	return nil
}

// Ping checks that the backend answers, with one point read: cheap enough
// for a readiness probe, unlike Health, which counts.
func (s *Store) Ping(ctx context.Context) error {
	done, err := s.enter()
	if err != nil {
		return wrap("ping", "", err)
	}
	defer done()
	_, now := s.now()
	_, err = s.c.drv.Get(ctx, s.ns, "ping", now) // no key lives outside the layout's prefixes
	if err == nil || isNotFound(err) {
		return nil
	}
	return wrap("ping", "", err)
}

// Reset wipes everything in the store's namespace (entries, runs, leases,
// sessions and history) in one atomic step and returns how many records it
// cleared: entries, runs, step outputs, leases, sessions and history entries,
// expired ones included. Lease fences keep increasing after a Reset.
func (s *Store) Reset(ctx context.Context) (int64, error) {
	done, err := s.enter()
	if err != nil {
		return 0, wrap("reset", "", err)
	}
	defer done()
	r, err := s.c.drv.Reset(ctx, &backend.ResetQuery{NS: s.ns, CountPrefixes: []string{
		layout.KVPrefix, layout.RunPrefix, layout.OutputPrefix, layout.LeasePrefix, layout.SessionPrefix}})
	if err != nil {
		return 0, wrap("reset", "", err)
	}
	return r.Records + r.Events, nil
}
