package state_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
)

// fullDriver is a memory backend with every optional interface: its
// Claimer and Leaser skip every call (backend.ErrSkip), so that package
// state serves them with its portable code after asking.
type fullDriver struct {
	*memstate.Driver
	claims, leases atomic.Int64
}

func (d *fullDriver) ClaimRun(context.Context, *backend.ClaimQuery) (backend.ClaimResult, error) {
	d.claims.Add(1)
	return backend.ClaimResult{}, backend.ErrSkip
}

func (d *fullDriver) Lease(context.Context, *backend.LeaseQuery) (backend.LeaseResult, error) {
	d.leases.Add(1)
	return backend.LeaseResult{}, backend.ErrSkip
}

func (d *fullDriver) Ping(context.Context) error { return nil }

func (d *fullDriver) ServerTime(context.Context) (time.Time, error) { return time.Now(), nil }

func (d *fullDriver) CheckConfig(context.Context) ([]string, error) { return nil, nil }

// observedCall is one call an Observer was told of.
type observedCall struct {
	op  string
	err error
}

// TestObserverAndTracerAreToldOfTheSameCalls drives a store over a driver
// with every optional interface, with an Observer and a Tracer: both are
// clients of the store's one choke point, so they must see the same calls,
// in the same order, with the same outcomes, every optional interface's
// included.
func TestObserverAndTracerAreToldOfTheSameCalls(t *testing.T) {
	ctx := context.Background()
	d := &fullDriver{Driver: memstate.New()}
	tr := &recordingTracer{}
	var mu sync.Mutex
	var observed []observedCall
	st, err := state.New(d, &state.Options{Tracer: tr, SweepInterval: -1, ClockSyncInterval: -1, HistoryMaxEvents: 8,
		Observer: func(call string, _ time.Duration, err error) {
			mu.Lock()
			defer mu.Unlock()
			observed = append(observed, observedCall{call, err})
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 10 {
		if _, err := st.Set(ctx, fmt.Sprint("k", i), i); err != nil {
			t.Fatal(err)
		}
	}
	_, _ = st.Get(ctx, "nothing")
	if _, err := st.List(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	_, _ = st.Set(ctx, "k0", 1, state.IfVersion(1)) // a conflict
	run, err := st.CreateRun(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, run.ID, "agent"); err != nil { // skipped by the driver: served portably
		t.Fatal(err)
	}
	if _, err := st.TryAcquireLease(ctx, "res", "agent", time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Health(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.History(ctx, state.HistoryQuery{Limit: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	tr.mu.Lock()
	defer tr.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	// The background calls (the server's clock, its configuration) may
	// begin after Close cancelled them: they end with context.Canceled.
	background := func(op string, err error) bool {
		return (op == "server_time" || op == "check_config") && errors.Is(err, context.Canceled)
	}
	var traced, ops []string
	for i, c := range tr.calls {
		traced = append(traced, c.Op)
		switch end := tr.ends[i]; {
		case c.Op == "commit" && errors.Is(end, state.ErrConflict), c.Op == "get" && errors.Is(end, backend.ErrNotFound),
			background(c.Op, end):
		case end != nil:
			t.Errorf("traced call %d (%s) ended with %v; a skipped fast path is an answer, not a failure", i, c.Op, end)
		}
	}
	for i, o := range observed {
		ops = append(ops, o.op)
		if o.err != nil && (o.op != "get" || !errors.Is(o.err, backend.ErrNotFound)) && !background(o.op, o.err) {
			t.Errorf("observed call %d (%s) failed with %v", i, o.op, o.err)
		}
	}
	// The background calls run beside the others: compare the calls, not
	// their order.
	slices.Sort(ops)
	slices.Sort(traced)
	if !slices.Equal(ops, traced) {
		t.Fatalf("the Observer and the Tracer were told of different calls:\nobserved %v\ntraced   %v", ops, traced)
	}
	for _, op := range []string{"commit", "get", "get_many", "list", "count", "history", "reset", "update", "claim",
		"lease", "sweep", "trim", "ping", "server_time", "check_config"} {
		if !slices.Contains(ops, op) {
			t.Errorf("no %q call went through the choke point; calls: %v", op, ops)
		}
	}
	if d.claims.Load() != 1 || d.leases.Load() != 1 {
		t.Errorf("the driver's Claimer was asked %d times, its Leaser %d; want once each", d.claims.Load(), d.leases.Load())
	}
}

// guardDriver is a memory backend that records every call it gets after
// Close began, or with a context that has ended: package state promises
// drivers neither (see package backend).
type guardDriver struct {
	*memstate.Driver
	closing   atomic.Bool
	late, ctx atomic.Int64
	calls     atomic.Int64
}

func (d *guardDriver) check(ctx context.Context) {
	d.calls.Add(1)
	if d.closing.Load() {
		d.late.Add(1)
	}
	if ctx.Err() != nil {
		d.ctx.Add(1)
	}
}

func (d *guardDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	d.check(ctx)
	return d.Driver.Get(ctx, ns, key, now)
}

func (d *guardDriver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	d.check(ctx)
	return d.Driver.GetMany(ctx, q)
}

func (d *guardDriver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	d.check(ctx)
	return d.Driver.List(ctx, q)
}

func (d *guardDriver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	d.check(ctx)
	return d.Driver.Commit(ctx, txn)
}

func (d *guardDriver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	d.check(ctx)
	return d.Driver.Update(ctx, q, fn)
}

func (d *guardDriver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	d.check(ctx)
	return d.Driver.History(ctx, q)
}

func (d *guardDriver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	d.check(ctx)
	return d.Driver.TrimHistory(ctx, q)
}

func (d *guardDriver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	d.check(ctx)
	return d.Driver.Sweep(ctx, q)
}

func (d *guardDriver) Close() error {
	d.closing.Store(true)
	return d.Driver.Close()
}

// TestNoDriverCallAfterCloseOrWithAnEndedContext races writers, readers,
// waiters and the background sweeper of a store against its Close, and
// makes calls with contexts that have ended: the driver must see no call
// once Close began and none with an ended context, every caller gets
// ErrClosed or its context's error, and the drivers need not check either.
func TestNoDriverCallAfterCloseOrWithAnEndedContext(t *testing.T) {
	for round := range 20 {
		d := &guardDriver{Driver: memstate.New()}
		st, err := state.New(d, &state.Options{SweepInterval: time.Millisecond, HistoryMaxEvents: 8,
			WaitPollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		ended, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := st.Set(ended, "k", 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("a Set with a cancelled context: %v", err)
		}
		if _, err := st.Get(ended, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("a Get with a cancelled context: %v", err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					key := fmt.Sprint("k", w, "-", i%5)
					_, err := st.Set(ctx, key, i)
					if err == nil {
						_, err = st.Get(ctx, key)
					}
					if err == nil {
						wctx, cancel := context.WithTimeout(ctx, time.Millisecond)
						_, err = st.WaitKey(wctx, key, 1<<62)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) {
							err = nil
						}
					}
					if errors.Is(err, state.ErrClosed) {
						return
					}
					if err != nil && !errors.Is(err, state.ErrNotFound) {
						t.Errorf("round %d: %v", round, err)
						return
					}
				}
			})
		}
		close(start)
		for deadline := time.Now().Add(realWait); d.calls.Load() < 200 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // let the calls get going before Close
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if n := d.late.Load(); n > 0 {
			t.Fatalf("round %d: the driver got %d calls after Close began", round, n)
		}
		if n := d.ctx.Load(); n > 0 {
			t.Fatalf("round %d: the driver got %d calls with an ended context", round, n)
		}
	}
}
