package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/statetest"
)

type traceKey struct{}

// recordingTracer records every call it brackets and tags the context it
// returns with the call's sequence number.
type recordingTracer struct {
	mu    sync.Mutex
	calls []state.BackendCall
	ends  []error
}

func (r *recordingTracer) StartCall(ctx context.Context, c state.BackendCall) (context.Context, func(error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.calls)
	r.calls = append(r.calls, c)
	r.ends = append(r.ends, errors.New("not ended"))
	return context.WithValue(ctx, traceKey{}, i), func(err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ends[i] = err
	}
}

// ops returns the ops recorded since call from.
func (r *recordingTracer) ops(from int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ops []string
	for _, c := range r.calls[from:] {
		ops = append(ops, c.Op)
	}
	return ops
}

// ctxDriver is a memory driver that records the trace tag of the context
// each Get and Commit receives (the embedded driver keeps every optional
// interface of memstate).
type ctxDriver struct {
	*memstate.Driver
	mu   sync.Mutex
	seen []any
}

func (d *ctxDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	d.mu.Lock()
	d.seen = append(d.seen, ctx.Value(traceKey{}))
	d.mu.Unlock()
	return d.Driver.Get(ctx, ns, key, now)
}

func (d *ctxDriver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	d.mu.Lock()
	d.seen = append(d.seen, ctx.Value(traceKey{}))
	d.mu.Unlock()
	return d.Driver.Commit(ctx, txn)
}

func TestTracerBracketsEveryBackendCall(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	tr := &recordingTracer{}
	drv := &ctxDriver{Driver: memstate.New()}
	st, err := state.New(drv, &state.Options{Tracer: tr, Clock: statetest.NewClock(), SweepInterval: -1, Namespace: "team-a"})
	is.NoErr(err)
	defer st.Close()

	_, err = st.Set(ctx, "plan/42", json.RawMessage(`{"secret":"value"}`))
	is.NoErr(err)
	_, err = st.Get(ctx, "nothing/here")
	is.True(errors.Is(err, state.ErrNotFound))
	_, err = st.Set(ctx, "plan/42", json.RawMessage(`1`), state.IfVersion(12345))
	is.True(errors.Is(err, state.ErrConflict))
	run, err := st.CreateRun(ctx, "r", nil)
	is.NoErr(err)
	_, err = st.ClaimRun(ctx, run.ID, "agent-a")
	is.NoErr(err)
	_, err = st.TryAcquireLease(ctx, "res", "agent-a", time.Minute)
	is.NoErr(err)
	_, err = st.Sweep(ctx)
	is.NoErr(err)

	tr.mu.Lock()
	defer tr.mu.Unlock()
	ops := map[string]bool{}
	conflicts, notFound := 0, 0
	for i, c := range tr.calls {
		ops[c.Op] = true
		is.Equal(c.Backend, "memory") // every call names the backend
		if c.Op == "sweep" {
			is.Equal(c.Namespace, "") // a sweep works in every namespace
		} else {
			is.Equal(c.Namespace, "team-a") // and the namespace it works in
		}
		if c.Op == "commit" && c.Items == 0 {
			t.Errorf("call %d: a commit with 0 items", i)
		}
		switch {
		case errors.Is(tr.ends[i], state.ErrConflict):
			conflicts++
		case errors.Is(tr.ends[i], backend.ErrNotFound):
			notFound++
		case tr.ends[i] != nil:
			t.Errorf("call %d (%s) ended with %v", i, c.Op, tr.ends[i])
		}
	}
	for _, op := range []string{"commit", "get", "update", "sweep"} { // memstate claims and leases by update
		if !ops[op] {
			t.Errorf("no %q call traced; traced %v", op, ops)
		}
	}
	is.True(conflicts >= 1) // the failed compare-and-set's commit ended with ErrConflict
	is.True(notFound >= 1)  // the missing key's get ended with ErrNotFound

	// The driver ran every Get and Commit with the context the tracer
	// returned for that very call.
	drv.mu.Lock()
	defer drv.mu.Unlock()
	is.True(len(drv.seen) > 0)
	for _, v := range drv.seen {
		i, ok := v.(int)
		if !ok {
			t.Fatalf("the driver got a context without the tracer's tag: %v", v)
		}
		if op := tr.calls[i].Op; op != "get" && op != "commit" {
			t.Errorf("a Get or Commit ran with the context of call %d, a %s", i, op)
		}
	}
}

func TestTracerSeesNamespaceViewsAndCallersContext(t *testing.T) {
	is := is.New(t)
	tr := &recordingTracer{}
	st, err := state.New(memstate.New(), &state.Options{Tracer: tr, SweepInterval: -1})
	is.NoErr(err)
	defer st.Close()
	other, err := st.Namespace("other")
	is.NoErr(err)
	from := len(tr.ops(0))
	_, err = other.Set(context.Background(), "k", json.RawMessage(`1`))
	is.NoErr(err)
	is.True(slices.Contains(tr.ops(from), "commit"))
	tr.mu.Lock()
	for _, c := range tr.calls[from:] {
		is.Equal(c.Namespace, "other") // a namespace view's calls carry its namespace
	}
	tr.mu.Unlock()
}

func TestTracerSeesHistoryTrims(t *testing.T) {
	tr := &recordingTracer{}
	st, err := state.New(memstate.New(), &state.Options{Tracer: tr, SweepInterval: -1, HistoryMaxEvents: 1, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 100 {
		if _, err := st.Set(context.Background(), "k", json.RawMessage(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	ops := tr.ops(0)
	if !slices.Contains(ops, "trim") {
		t.Fatalf("100 writes with HistoryMaxEvents 1 traced no trim; ops %v", ops)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, c := range tr.calls {
		if c.Op == "trim" && c.Namespace != "team-a" {
			t.Errorf("trim in namespace %q, want team-a", c.Namespace)
		}
	}
}
