package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

// Every call a Store makes to its backend goes through its gate, the one
// choke point between the portable code and the driver (as a gocloud
// portable type's calls go through its tracer's Start and End). Each of
// the gate's methods is the same few lines around the driver's method:
// begin (the context's check, the Tracer's StartCall, the Observer's
// clock), the call, end (the Observer, the end the Tracer returned) and,
// for a write that appended history, the trim accounting (trim.go). The
// Tracer and the Observer are two clients of it; nothing else in the
// package calls a driver, and a new optional driver interface is resolved
// and bracketed here, in one place.
//
// The gate does not check that the store is open: every call it makes is
// made inside Store.enter, or by a background goroutine that Close stops
// before it closes the driver, which is what lets package backend promise
// drivers that no call comes after (or during) Close. It does check the
// caller's context, so that no driver is called with one that has ended.

// The names of the backend calls, as an Observer and a Tracer see them.
const (
	callGet         = "get"
	callGetMany     = "get_many"
	callList        = "list"
	callCount       = "count"
	callCommit      = "commit"
	callHistory     = "history"
	callReset       = "reset"
	callUpdate      = "update"
	callClaim       = "claim"
	callLease       = "lease"
	callSweep       = "sweep"
	callTrim        = "trim"
	callPing        = "ping"
	callServerTime  = "server_time"
	callCheckConfig = "check_config"
)

// gate is a backend split into its optional parts, resolved once so that
// the Store never type-asserts on a hot path, with the hooks every call
// passes.
type gate struct {
	drv      backend.Driver
	upd      backend.Updater
	claimer  backend.Claimer
	leaser   backend.Leaser
	sweeper  backend.Sweeper
	trimmer  backend.HistoryTrimmer
	pinger   backend.Pinger
	clock    backend.ServerClock
	config   backend.ConfigChecker
	notifier backend.Notifier
	// consecutive is what the driver says of its event ids
	// (backend.ConsecutiveHistory).
	consecutive bool

	name   string // the driver's Name
	tracer Tracer
	obs    Observer
	// trim is told of the events each successful write appended; nil until
	// the store has made it (it calls the gate too).
	trim *trimmer
	// seal seals what is written and opens what is read when encryption
	// at rest is on (seal.go); nil when it is off.
	seal *sealer
}

func newGate(d backend.Driver, tracer Tracer, obs Observer) *gate {
	g := &gate{drv: d, name: d.Name(), tracer: tracer, obs: obs}
	g.upd, _ = d.(backend.Updater)
	g.claimer, _ = d.(backend.Claimer)
	g.leaser, _ = d.(backend.Leaser)
	g.sweeper, _ = d.(backend.Sweeper)
	g.trimmer, _ = d.(backend.HistoryTrimmer)
	g.pinger, _ = d.(backend.Pinger)
	g.clock, _ = d.(backend.ServerClock)
	g.config, _ = d.(backend.ConfigChecker)
	g.notifier, _ = d.(backend.Notifier)
	if c, ok := d.(backend.ConsecutiveHistory); ok {
		g.consecutive = c.ConsecutiveHistory()
	}
	return g
}

// span is one backend call between begin and end.
type span struct {
	g     *gate
	op    string
	start time.Time
	end   func(error) // the Tracer's, or nil
}

// begin starts the backend call op in namespace ns on items items and
// returns the context the driver is to be called with. When the caller's
// context has already ended, the call ends at once with its error, which
// begin returns: the driver is not called, but the Observer and the
// Tracer see a call that failed.
func (g *gate) begin(ctx context.Context, op, ns string, items int) (context.Context, span, error) {
	s := span{g: g, op: op}
	if g.tracer != nil {
		ctx, s.end = g.tracer.StartCall(ctx, BackendCall{Op: op, Backend: g.name, Namespace: ns, Items: items})
	}
	if g.obs != nil {
		s.start = time.Now()
	}
	if err := ctx.Err(); err != nil {
		s.done(err)
		return ctx, span{}, err
	}
	return ctx, s, nil
}

// finish ends the call with the driver's error err; the Tracer is told
// traced instead (an answer it must not count as a failure, such as
// ErrConflict).
func (s span) finish(err, traced error) {
	if s.g.obs != nil {
		s.g.obs(s.op, time.Since(s.start), err)
	}
	if s.end != nil {
		s.end(traced)
	}
}

// done ends the call with the driver's error err.
func (s span) done(err error) { s.finish(err, err) }

// skipped returns err, or nil when it is a fast path's backend.ErrSkip:
// an answer (the portable code serves the call), not a failure to count.
func skipped(err error) error {
	if errors.Is(err, backend.ErrSkip) {
		return nil
	}
	return err
}

// appended accounts for n events a write in ns appended (trim.go), with
// the caller's context.
func (g *gate) appended(ctx context.Context, ns string, n int) {
	if g.trim != nil {
		g.trim.appended(ctx, ns, n)
	}
}

func (g *gate) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	cctx, s, err := g.begin(ctx, callGet, ns, 0)
	if err != nil {
		return backend.Record{}, err
	}
	r, err := g.drv.Get(cctx, ns, key, now)
	s.done(err)
	if err == nil && g.seal != nil {
		recs := []backend.Record{r}
		if err = g.openRecords(ctx, ns, recs); err != nil {
			return backend.Record{}, err
		}
		r = recs[0]
	} else if err == nil && len(r.Value) > 0 && r.Value[0] == 0 && isSealed(r.Value) {
		return backend.Record{}, fmt.Errorf("record %q is encrypted: %w", r.Key, ErrNoEncryption)
	}
	return r, err
}

func (g *gate) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	cctx, s, err := g.begin(ctx, callGetMany, q.NS, len(q.Keys))
	if err != nil {
		return nil, err
	}
	recs, err := g.drv.GetMany(cctx, q)
	s.done(err)
	if err == nil {
		err = g.openRecords(ctx, q.NS, recs)
	}
	return recs, err
}

func (g *gate) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	cctx, s, err := g.begin(ctx, callList, q.NS, 0)
	if err != nil {
		return nil, err
	}
	recs, err := g.drv.List(cctx, q)
	s.done(err)
	if err == nil && !q.KeysOnly {
		err = g.openRecords(ctx, q.NS, recs)
	}
	return recs, err
}

func (g *gate) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	cctx, s, err := g.begin(ctx, callCount, q.NS, 0)
	if err != nil {
		return backend.Counts{}, err
	}
	c, err := g.drv.Count(cctx, q)
	s.done(err)
	return c, err
}

// Commit tells the Tracer ErrConflict when a condition failed, so that a
// trace shows the retries of optimistic writers.
func (g *gate) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	txn, err := g.sealTxn(ctx, txn.NS, txn)
	if err != nil {
		return backend.Result{}, err
	}
	cctx, s, err := g.begin(ctx, callCommit, txn.NS, len(txn.Then))
	if err != nil {
		return backend.Result{}, err
	}
	res, err := g.drv.Commit(cctx, withPrincipal(ctx, txn))
	if err == nil && res.Failed >= 0 {
		s.finish(nil, ErrConflict)
	} else {
		s.done(err)
	}
	if err == nil && res.Committed {
		g.appended(ctx, txn.NS, len(txn.Events))
	}
	return res, err
}

func (g *gate) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	cctx, s, err := g.begin(ctx, callHistory, q.NS, 0)
	if err != nil {
		return nil, err
	}
	evs, err := g.drv.History(cctx, q)
	s.done(err)
	if err == nil {
		err = g.openEvents(ctx, q.NS, evs)
	}
	return evs, err
}

func (g *gate) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	cctx, s, err := g.begin(ctx, callReset, q.NS, 0)
	if err != nil {
		return backend.ResetResult{}, err
	}
	r, err := g.drv.Reset(cctx, q)
	s.done(err)
	return r, err
}

// Update accounts for the events of the Txn fn returned last, the one
// committed.
func (g *gate) Update(ctx context.Context, q *backend.GetQuery, fn updateFunc) (backend.Result, error) {
	if err := g.prepare(ctx, q); err != nil {
		return backend.Result{}, err
	}
	cctx, s, err := g.begin(ctx, callUpdate, q.NS, len(q.Keys))
	if err != nil {
		return backend.Result{}, err
	}
	events := 0
	res, err := g.upd.Update(cctx, q, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		if err := g.openRecords(ctx, q.NS, recs); err != nil {
			return nil, err
		}
		txn, err := fn(recs, now)
		events = 0
		if txn != nil {
			events = len(txn.Events)
		}
		if err != nil {
			return withPrincipal(ctx, txn), err
		}
		sealed, err := g.sealTxn(ctx, q.NS, txn)
		if err != nil {
			return sealed, err
		}
		return withPrincipal(ctx, sealed), nil
	})
	s.done(err)
	if err == nil && res.Committed {
		g.appended(ctx, q.NS, events)
	}
	return res, err
}

// ClaimRun accounts for the one event a claim or a heartbeat appends.
func (g *gate) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	cctx, s, err := g.begin(ctx, callClaim, q.NS, 0)
	if err != nil {
		return backend.ClaimResult{}, err
	}
	res, err := g.claimer.ClaimRun(cctx, q)
	s.done(skipped(err))
	if err == nil && (res.Outcome == backend.ClaimAcquired || res.Outcome == backend.ClaimRenewed) {
		g.appended(ctx, q.NS, 1)
	}
	return res, err
}

// Lease accounts for the one event a lease action that succeeded appends.
func (g *gate) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	cctx, s, err := g.begin(ctx, callLease, q.NS, 0)
	if err != nil {
		return backend.LeaseResult{}, err
	}
	res, err := g.leaser.Lease(cctx, q)
	s.done(skipped(err))
	if err == nil && res.OK {
		g.appended(ctx, q.NS, 1)
	}
	return res, err
}

func (g *gate) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	cctx, s, err := g.begin(ctx, callSweep, "", 0)
	if err != nil {
		return backend.SweepResult{}, err
	}
	r, err := g.sweeper.Sweep(cctx, q)
	s.done(err)
	return r, err
}

func (g *gate) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	cctx, s, err := g.begin(ctx, callTrim, q.NS, 0)
	if err != nil {
		return backend.TrimResult{}, err
	}
	r, err := g.trimmer.TrimHistory(cctx, q)
	s.done(err)
	return r, err
}

func (g *gate) Ping(ctx context.Context) error {
	cctx, s, err := g.begin(ctx, callPing, "", 0)
	if err != nil {
		return err
	}
	err = g.pinger.Ping(cctx)
	s.done(err)
	return err
}

func (g *gate) ServerTime(ctx context.Context) (time.Time, error) {
	cctx, s, err := g.begin(ctx, callServerTime, "", 0)
	if err != nil {
		return time.Time{}, err
	}
	t, err := g.clock.ServerTime(cctx)
	s.done(err)
	return t, err
}

func (g *gate) CheckConfig(ctx context.Context) ([]string, error) {
	cctx, s, err := g.begin(ctx, callCheckConfig, "", 0)
	if err != nil {
		return nil, err
	}
	w, err := g.config.CheckConfig(cctx)
	s.done(err)
	return w, err
}

// Notify runs the driver's notifier. It is a subscription that lasts as
// long as the store, not a call to time: it is neither traced nor
// observed.
func (g *gate) Notify(ctx context.Context, fn func(ns string)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return g.notifier.Notify(ctx, fn)
}

// Close closes the driver; Store.Close calls it once, after every other
// call has returned.
func (g *gate) Close() error { return g.drv.Close() }
