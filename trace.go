package state

import (
	"context"
	"time"

	"github.com/statesidecar/state/backend"
)

// A Tracer brackets every call a Store makes to its backend with a context,
// for distributed tracing: package otelstate gives each call an
// OpenTelemetry span. Unlike an Observer it sees the call's context (so a
// span of the caller becomes the parent) and what the call works on. Set
// it in Options.Tracer; without one a Store makes no extra call at all.
type Tracer interface {
	// StartCall is called before the backend call c; the call runs with the
	// returned context, and end is called with the call's error once it
	// returned. Two errors it is given are answers, not failures: a
	// backend.ErrNotFound from "get", and ErrConflict from a "commit" whose
	// condition failed (the Store then retries or reports the conflict). It
	// must be safe for concurrent use.
	StartCall(ctx context.Context, c BackendCall) (_ context.Context, end func(err error))
}

// A BackendCall describes one call of a Store to its backend, as a Tracer
// sees it: never a key or a value.
type BackendCall struct {
	// Op is the call's name, one an Observer gets: "get", "get_many",
	// "list", "count", "commit", "history", "reset", "update", "claim",
	// "lease", "sweep", "trim" or "ping".
	Op string
	// Backend is the driver's name, such as "sqlite" or "redis".
	Backend string
	// Namespace is the namespace the call works in; "" for a sweep or a
	// ping, which work in no namespace in particular.
	Namespace string
	// Items is the number of keys a get_many or update reads or the number
	// of writes a commit applies; 0 for the other calls.
	Items int
}

// traced wraps every part of ds so that t brackets its calls; without t it
// returns ds unchanged. Parts it does not know pass through untraced.
func (ds drivers) traced(t Tracer) drivers {
	if t == nil {
		return ds
	}
	tr := tracing{t, ds.drv.Name()}
	ds.drv = tracedDriver{ds.drv, tr}
	if ds.upd != nil {
		ds.upd = tracedUpdater{ds.upd, tr}
	}
	if ds.claimer != nil {
		ds.claimer = tracedClaimer{ds.claimer, tr}
	}
	if ds.leaser != nil {
		ds.leaser = tracedLeaser{ds.leaser, tr}
	}
	if ds.sweeper != nil {
		ds.sweeper = tracedSweeper{ds.sweeper, tr}
	}
	if ds.trimmer != nil {
		ds.trimmer = tracedTrimmer{ds.trimmer, tr}
	}
	if ds.pinger != nil {
		ds.pinger = tracedPinger{ds.pinger, tr}
	}
	return ds
}

// trace runs f under t as the call c.
func trace[T any](ctx context.Context, t Tracer, c BackendCall, f func(context.Context) (T, error)) (T, error) {
	ctx, end := t.StartCall(ctx, c)
	v, err := f(ctx)
	end(err)
	return v, err
}

// tracing is what every traced part holds: the Tracer and the backend's
// name.
type tracing struct {
	t       Tracer
	backend string
}

// call describes the backend call op in namespace ns on items items.
func (o tracing) call(op, ns string, items int) BackendCall {
	return BackendCall{Op: op, Backend: o.backend, Namespace: ns, Items: items}
}

type tracedDriver struct {
	d backend.Driver
	tracing
}

func (o tracedDriver) Name() string { return o.d.Name() }

func (o tracedDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	return trace(ctx, o.t, o.call("get", ns, 0), func(ctx context.Context) (backend.Record, error) { return o.d.Get(ctx, ns, key, now) })
}

func (o tracedDriver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	return trace(ctx, o.t, o.call("get_many", q.NS, len(q.Keys)), func(ctx context.Context) ([]backend.Record, error) { return o.d.GetMany(ctx, q) })
}

func (o tracedDriver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	return trace(ctx, o.t, o.call("list", q.NS, 0), func(ctx context.Context) ([]backend.Record, error) { return o.d.List(ctx, q) })
}

func (o tracedDriver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	return trace(ctx, o.t, o.call("count", q.NS, 0), func(ctx context.Context) (backend.Counts, error) { return o.d.Count(ctx, q) })
}

// Commit ends its call with ErrConflict when a condition failed, so that a
// trace shows the retries of optimistic writers.
func (o tracedDriver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	ctx, end := o.t.StartCall(ctx, o.call("commit", txn.NS, len(txn.Then)))
	res, err := o.d.Commit(ctx, txn)
	if err == nil && res.Failed >= 0 {
		end(ErrConflict)
	} else {
		end(err)
	}
	return res, err
}

func (o tracedDriver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	return trace(ctx, o.t, o.call("history", q.NS, 0), func(ctx context.Context) ([]backend.Event, error) { return o.d.History(ctx, q) })
}

func (o tracedDriver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	return trace(ctx, o.t, o.call("reset", q.NS, 0), func(ctx context.Context) (backend.ResetResult, error) { return o.d.Reset(ctx, q) })
}

func (o tracedDriver) Close() error { return o.d.Close() }

type tracedUpdater struct {
	u backend.Updater
	tracing
}

func (o tracedUpdater) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	return trace(ctx, o.t, o.call("update", q.NS, len(q.Keys)), func(ctx context.Context) (backend.Result, error) { return o.u.Update(ctx, q, fn) })
}

type tracedClaimer struct {
	c backend.Claimer
	tracing
}

func (o tracedClaimer) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	return trace(ctx, o.t, o.call("claim", q.NS, 0), func(ctx context.Context) (backend.ClaimResult, error) { return o.c.ClaimRun(ctx, q) })
}

type tracedLeaser struct {
	l backend.Leaser
	tracing
}

func (o tracedLeaser) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	return trace(ctx, o.t, o.call("lease", q.NS, 0), func(ctx context.Context) (backend.LeaseResult, error) { return o.l.Lease(ctx, q) })
}

type tracedSweeper struct {
	s backend.Sweeper
	tracing
}

func (o tracedSweeper) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	return trace(ctx, o.t, o.call("sweep", "", 0), func(ctx context.Context) (backend.SweepResult, error) { return o.s.Sweep(ctx, q) })
}

type tracedTrimmer struct {
	tr backend.HistoryTrimmer
	tracing
}

func (o tracedTrimmer) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	return trace(ctx, o.t, o.call("trim", q.NS, 0), func(ctx context.Context) (backend.TrimResult, error) { return o.tr.TrimHistory(ctx, q) })
}

type tracedPinger struct {
	p backend.Pinger
	tracing
}

func (o tracedPinger) Ping(ctx context.Context) error {
	_, err := trace(ctx, o.t, o.call("ping", "", 0), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, o.p.Ping(ctx)
	})
	return err
}
