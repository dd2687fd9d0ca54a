package state

import (
	"context"
	"time"

	"github.com/statesidecar/state/backend"
)

// An Observer is told about every call a Store makes to its backend: the
// call's name ("get", "get_many", "list", "count", "commit", "history",
// "reset", "update", "claim", "lease", "sweep", "trim" or "ping"), how long it took and its
// error (a backend.ErrNotFound from "get" is an answer, not a failure). Use
// it for metrics; it must be fast and safe for concurrent use.
type Observer func(call string, took time.Duration, err error)

// drivers is a backend split into its optional parts, resolved once so that
// the Store never type-asserts on the hot path and so that an Observer can
// wrap every part without hiding any.
type drivers struct {
	drv     backend.Driver
	upd     backend.Updater
	claimer backend.Claimer
	leaser  backend.Leaser
	sweeper backend.Sweeper
	trimmer backend.HistoryTrimmer
	pinger  backend.Pinger
}

func resolve(d backend.Driver, obs Observer) drivers {
	var ds drivers
	ds.drv = d
	ds.upd, _ = d.(backend.Updater)
	ds.claimer, _ = d.(backend.Claimer)
	ds.leaser, _ = d.(backend.Leaser)
	ds.sweeper, _ = d.(backend.Sweeper)
	ds.trimmer, _ = d.(backend.HistoryTrimmer)
	ds.pinger, _ = d.(backend.Pinger)
	if obs == nil {
		return ds
	}
	ds.drv = observedDriver{d, obs}
	if ds.upd != nil {
		ds.upd = observedUpdater{ds.upd, obs}
	}
	if ds.claimer != nil {
		ds.claimer = observedClaimer{ds.claimer, obs}
	}
	if ds.leaser != nil {
		ds.leaser = observedLeaser{ds.leaser, obs}
	}
	if ds.sweeper != nil {
		ds.sweeper = observedSweeper{ds.sweeper, obs}
	}
	if ds.trimmer != nil {
		ds.trimmer = observedTrimmer{ds.trimmer, obs}
	}
	if ds.pinger != nil {
		ds.pinger = observedPinger{ds.pinger, obs}
	}
	return ds
}

func observe[T any](obs Observer, call string, f func() (T, error)) (T, error) {
	start := time.Now()
	v, err := f()
	obs(call, time.Since(start), err)
	return v, err
}

type observedDriver struct {
	d   backend.Driver
	obs Observer
}

func (o observedDriver) Name() string { return o.d.Name() }

func (o observedDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	return observe(o.obs, "get", func() (backend.Record, error) { return o.d.Get(ctx, ns, key, now) })
}

func (o observedDriver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	return observe(o.obs, "get_many", func() ([]backend.Record, error) { return o.d.GetMany(ctx, q) })
}

func (o observedDriver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	return observe(o.obs, "list", func() ([]backend.Record, error) { return o.d.List(ctx, q) })
}

func (o observedDriver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	return observe(o.obs, "count", func() (backend.Counts, error) { return o.d.Count(ctx, q) })
}

func (o observedDriver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	return observe(o.obs, "commit", func() (backend.Result, error) { return o.d.Commit(ctx, txn) })
}

func (o observedDriver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	return observe(o.obs, "history", func() ([]backend.Event, error) { return o.d.History(ctx, q) })
}

func (o observedDriver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	return observe(o.obs, "reset", func() (backend.ResetResult, error) { return o.d.Reset(ctx, q) })
}

func (o observedDriver) Close() error { return o.d.Close() }

type observedUpdater struct {
	u   backend.Updater
	obs Observer
}

func (o observedUpdater) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	return observe(o.obs, "update", func() (backend.Result, error) { return o.u.Update(ctx, q, fn) })
}

type observedClaimer struct {
	c   backend.Claimer
	obs Observer
}

func (o observedClaimer) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	return observe(o.obs, "claim", func() (backend.ClaimResult, error) { return o.c.ClaimRun(ctx, q) })
}

type observedLeaser struct {
	l   backend.Leaser
	obs Observer
}

func (o observedLeaser) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	return observe(o.obs, "lease", func() (backend.LeaseResult, error) { return o.l.Lease(ctx, q) })
}

type observedSweeper struct {
	s   backend.Sweeper
	obs Observer
}

func (o observedSweeper) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	return observe(o.obs, "sweep", func() (backend.SweepResult, error) { return o.s.Sweep(ctx, q) })
}

type observedTrimmer struct {
	t   backend.HistoryTrimmer
	obs Observer
}

func (o observedTrimmer) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	return observe(o.obs, "trim", func() (backend.TrimResult, error) { return o.t.TrimHistory(ctx, q) })
}

type observedPinger struct {
	p   backend.Pinger
	obs Observer
}

func (o observedPinger) Ping(ctx context.Context) error {
	_, err := observe(o.obs, "ping", func() (struct{}, error) { return struct{}{}, o.p.Ping(ctx) })
	return err
}
