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
	name := ds.drv.Name()
	ds.drv = tracedDriver{ds.drv, t, name}
	if ds.upd != nil {
		ds.upd = tracedUpdater{ds.upd, t, name}
	}
	if ds.claimer != nil {
		ds.claimer = tracedClaimer{ds.claimer, t, name}
	}
	if ds.leaser != nil {
		ds.leaser = tracedLeaser{ds.leaser, t, name}
	}
	if ds.sweeper != nil {
		ds.sweeper = tracedSweeper{ds.sweeper, t, name}
	}
	if ds.trimmer != nil {
		ds.trimmer = tracedTrimmer{ds.trimmer, t, name}
	}
	if ds.pinger != nil {
		ds.pinger = tracedPinger{ds.pinger, t, name}
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

type tracedDriver struct {
	d       backend.Driver
	t       Tracer
	backend string
}

func (o tracedDriver) call(op, ns string, items int) BackendCall {
	return BackendCall{Op: op, Backend: o.backend, Namespace: ns, Items: items}
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
	u       backend.Updater
	t       Tracer
	backend string
}

func (o tracedUpdater) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	c := BackendCall{Op: "update", Backend: o.backend, Namespace: q.NS, Items: len(q.Keys)}
	return trace(ctx, o.t, c, func(ctx context.Context) (backend.Result, error) { return o.u.Update(ctx, q, fn) })
}

type tracedClaimer struct {
	c       backend.Claimer
	t       Tracer
	backend string
}

func (o tracedClaimer) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	c := BackendCall{Op: "claim", Backend: o.backend, Namespace: q.NS}
	return trace(ctx, o.t, c, func(ctx context.Context) (backend.ClaimResult, error) { return o.c.ClaimRun(ctx, q) })
}

type tracedLeaser struct {
	l       backend.Leaser
	t       Tracer
	backend string
}

func (o tracedLeaser) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	c := BackendCall{Op: "lease", Backend: o.backend, Namespace: q.NS}
	return trace(ctx, o.t, c, func(ctx context.Context) (backend.LeaseResult, error) { return o.l.Lease(ctx, q) })
}

type tracedSweeper struct {
	s       backend.Sweeper
	t       Tracer
	backend string
}

func (o tracedSweeper) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	c := BackendCall{Op: "sweep", Backend: o.backend}
	return trace(ctx, o.t, c, func(ctx context.Context) (backend.SweepResult, error) { return o.s.Sweep(ctx, q) })
}

type tracedTrimmer struct {
	tr      backend.HistoryTrimmer
	t       Tracer
	backend string
}

func (o tracedTrimmer) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	c := BackendCall{Op: "trim", Backend: o.backend, Namespace: q.NS}
	return trace(ctx, o.t, c, func(ctx context.Context) (backend.TrimResult, error) { return o.tr.TrimHistory(ctx, q) })
}

type tracedPinger struct {
	p       backend.Pinger
	t       Tracer
	backend string
}

func (o tracedPinger) Ping(ctx context.Context) error {
	_, err := trace(ctx, o.t, BackendCall{Op: "ping", Backend: o.backend}, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, o.p.Ping(ctx)
	})
	return err
}
