package redisstate_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/layout"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/statetest"
)

// batchEnv is a store over a driver of its own, on a client of its own
// whose script calls a hook counts.
type batchEnv struct {
	d  *redisstate.Driver
	st *state.Store
	c  *commandCounter
}

func newBatchEnv(t *testing.T) *batchEnv {
	t.Helper()
	d, err := redisstate.Open(ctx, withParams(redistest.URL(t), "prefix="+redistest.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redistest.Purge(context.Background(), sharedClient(t), d.Prefix()) })
	st, err := state.New(d, &state.Options{SweepInterval: -1, Clock: statetest.NewClock()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	c := &commandCounter{}
	d.Client().AddHook(c)
	return &batchEnv{d: d, st: st, c: c}
}

// together makes calls while the driver's senders are held, each queued
// before the next is made (so in this order), then releases them and
// returns each call's error and the round trips the release made.
func (e *batchEnv) together(t *testing.T, calls ...func(context.Context) error) ([]error, []string) {
	t.Helper()
	queued, release := redisstate.Hold(e.d)
	errs := make([]chan error, len(calls))
	for i, call := range calls {
		errs[i] = make(chan error, 1)
		go func() { errs[i] <- call(context.WithValue(context.Background(), opKey{}, "batch")) }()
		for queued() != i+1 {
			time.Sleep(time.Millisecond) // polling a condition, not a timing assumption
		}
	}
	e.c.mu.Lock()
	e.c.trips = nil
	e.c.mu.Unlock()
	release()
	out := make([]error, len(calls))
	for i := range errs {
		out[i] = <-errs[i]
	}
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	return out, slices.Clone(e.c.trips)
}

// TestClaimsMadeTogetherGoInOneScriptCall queues claims on a held driver
// and checks that they go in one script call, take effect in the order
// they were made (a second agent's claim of a run claimed earlier in the
// batch is refused), and bump the counters as claims made alone do.
func TestClaimsMadeTogetherGoInOneScriptCall(t *testing.T) {
	e := newBatchEnv(t)
	var ids []string
	for range 2 {
		r, err := e.st.CreateRun(ctx, "job", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	parent, err := e.st.CreateRun(ctx, "parent", nil)
	if err != nil {
		t.Fatal(err)
	}
	child, err := e.st.CreateRun(ctx, "child", nil, state.WithParent(parent.ID))
	if err != nil {
		t.Fatal(err)
	}
	claims := make([]state.Claim, 5)
	claim := func(i int, id, agent string) func(context.Context) error {
		return func(ctx context.Context) error {
			c, err := e.st.ClaimRun(ctx, id, agent)
			claims[i] = c
			return err
		}
	}
	errs, trips := e.together(t,
		claim(0, ids[0], "x"),
		claim(1, ids[0], "y"), // after x, in the same batch: held
		claim(2, ids[1], "x"),
		claim(3, child.ID, "x"),
		claim(4, ids[0], "x")) // x's heartbeat
	for i, want := range []error{nil, state.ErrClaimed, nil, nil, nil} {
		if !errors.Is(errs[i], want) && errs[i] != want {
			t.Errorf("claim %d: got %v, want %v", i, errs[i], want)
		}
	}
	if !slices.Equal(trips, []string{"evalsha"}) {
		t.Errorf("five claims made together sent %v, want one script call", trips)
	}
	if claims[0].Fence != 1 || claims[2].Fence != 1 || claims[3].Fence != 1 || claims[4].Fence != 1 {
		t.Errorf("fences %d %d %d %d: each run's first claim and its heartbeat must have fence 1",
			claims[0].Fence, claims[2].Fence, claims[3].Fence, claims[4].Fence)
	}
	r, err := e.st.GetRun(ctx, ids[0])
	if err != nil || r.AgentID != "x" {
		t.Errorf("run claimed by %q (%v), want x, who asked first", r.AgentID, err)
	}
	p, err := e.st.GetRun(ctx, parent.ID)
	if err != nil || p.Children[state.StatusClaimed] != 1 {
		t.Errorf("parent counts %v claimed children (%v), want 1", p.Children, err)
	}
	// The history of run 0 ends with x's claim then x's heartbeat, in
	// the order of their revisions and ids.
	ops := oldestFirst(t, e.st, ids[0])
	if want := []string{"workflow.claim", "workflow.heartbeat"}; len(ops) < 2 || !slices.Equal(ops[len(ops)-2:], want) {
		t.Errorf("run history %v, want it to end with %v", ops, want)
	}
}

// TestLeaseCallsMadeTogetherTakeEffectInOrder queues lease calls on one
// resource on a held driver: they go in one script call, in order.
func TestLeaseCallsMadeTogetherTakeEffectInOrder(t *testing.T) {
	e := newBatchEnv(t)
	type out struct {
		ok    bool
		fence int64
	}
	res := make([]out, 5)
	acquire := func(i int, holder string) func(context.Context) error {
		return func(ctx context.Context) error {
			l, err := e.st.TryAcquireLease(ctx, "r", holder, time.Minute)
			res[i] = out{err == nil, l.Fence}
			if errors.Is(err, state.ErrLeaseHeld) {
				return nil
			}
			return err
		}
	}
	errs, trips := e.together(t,
		acquire(0, "a"),
		acquire(1, "b"), // a holds it
		func(ctx context.Context) error {
			ok, err := e.st.ReleaseLease(ctx, "r", "a")
			res[2].ok = ok
			return err
		},
		acquire(3, "b"), // free again: a new tenure
		func(ctx context.Context) error { _, err := e.st.RenewLease(ctx, "r", "b", time.Hour); return err })
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	if !slices.Equal(trips, []string{"evalsha"}) {
		t.Errorf("five lease calls made together sent %v, want one script call", trips)
	}
	if !res[0].ok || res[1].ok || !res[2].ok || !res[3].ok || res[3].fence <= res[0].fence {
		t.Errorf("results %+v: want a acquiring, b refused, then b acquiring with a higher fence", res)
	}
	l, err := e.st.GetLease(ctx, "r")
	if err != nil || l.Holder != "b" || l.Fence != res[3].fence {
		t.Errorf("lease %+v (%v), want b's with fence %d", l, err, res[3].fence)
	}
	if want, ops := []string{"lease.acquire", "lease.release", "lease.acquire", "lease.renew"}, oldestFirst(t, e.st, "r"); !slices.Equal(ops, want) {
		t.Errorf("lease history %v, want %v", ops, want)
	}
}

// oldestFirst returns the ops of key's history, oldest first, checking
// that ids and revisions increase.
func oldestFirst(t *testing.T, st *state.Store, key string) []string {
	t.Helper()
	h, err := st.History(ctx, state.HistoryQuery{Key: key, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(h)
	var ops []string
	for i, ev := range h {
		ops = append(ops, ev.Op)
		if i > 0 && (ev.Revision <= h[i-1].Revision || ev.ID <= h[i-1].ID) {
			t.Errorf("%s: event %d (id %d, revision %d) after id %d, revision %d", key, i, ev.ID, ev.Revision, h[i-1].ID, h[i-1].Revision)
		}
	}
	return ops
}

// TestAClaimThatFailsInABatchFailsOnlyItself corrupts one run's record:
// the batch's script fails having written nothing, and each claim is sent
// again alone, so that only the corrupt run's claim fails.
func TestAClaimThatFailsInABatchFailsOnlyItself(t *testing.T) {
	e := newBatchEnv(t)
	a, err := e.st.CreateRun(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.st.CreateRun(ctx, "b", nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := "{" + e.d.Prefix() + ":default}:r:" + backend.RunKey(b.ID)
	if err := e.d.Client().Set(ctx, bad, "not a record", 0).Err(); err != nil {
		t.Fatal(err)
	}
	claim := func(id string) func(context.Context) error {
		return func(ctx context.Context) error { _, err := e.st.ClaimRun(ctx, id, "x"); return err }
	}
	errs, trips := e.together(t, claim(a.ID), claim(b.ID), claim(a.ID))
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Errorf("errors %v: want only the corrupt run's claim to fail", errs)
	}
	if len(trips) != 4 {
		t.Errorf("round trips %v: want the batch, then each claim alone", trips)
	}
	c, err := e.st.GetRun(ctx, a.ID)
	if err != nil || c.Attempt != 1 {
		t.Errorf("run a has attempt %d (%v), want 1: claimed once, heartbeat once", c.Attempt, err)
	}
}

// TestACallerLeavesTheQueueWhenItsContextEnds: a queued claim whose
// context ends returns its context's error and is not sent.
func TestACallerLeavesTheQueueWhenItsContextEnds(t *testing.T) {
	e := newBatchEnv(t)
	r, err := e.st.CreateRun(ctx, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	queued, release := redisstate.Hold(e.d)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := e.st.ClaimRun(cctx, r.ID, "x"); done <- err }()
	for queued() != 1 {
		time.Sleep(time.Millisecond) // polling a condition, not a timing assumption
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("a claim whose context ended while it waited returned %v", err)
	}
	release()
	if got, err := e.st.GetRun(ctx, r.ID); err != nil || got.Status != state.StatusCreated {
		t.Errorf("run %s (%v): the claim whose caller left must not be sent", got.Status, err)
	}
}

// TestConformanceBatched runs the conformance suite with one sender of
// each kind, so that its concurrent tests (the linearizability models of
// claims and leases among them) have their calls batched, and with every
// claim and lease call made alone sent through the batch's script too, so
// that the suite's byte-for-byte checks against package state's portable
// code cover that script as TestConformance covers the scripts of lone
// calls.
func TestConformanceBatched(t *testing.T) {
	rdb := sharedClient(t)
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		prefix := redistest.Prefix()
		d, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: prefix, Senders: 1})
		if err != nil {
			t.Fatal(err)
		}
		redisstate.BatchAlways(d)
		t.Cleanup(func() {
			_ = d.Close()
			if err := redistest.Purge(context.Background(), rdb, prefix); err != nil {
				t.Error(err)
			}
		})
		return d
	})
}

// TestGetsMadeTogetherGoInOneScriptCall reads a plain record, one with a
// TTL (judged by Redis's clock, read once) and an absent one, together.
func TestGetsMadeTogetherGoInOneScriptCall(t *testing.T) {
	e := newBatchEnv(t)
	st, err := state.New(e.d, &state.Options{SweepInterval: -1, Namespace: "gets"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Set(ctx, "plain", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "ttl", 2, state.WithTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	recs := make([]backend.Record, 3)
	get := func(i int, key string) func(context.Context) error {
		return func(ctx context.Context) error {
			var err error
			recs[i], err = e.d.Get(ctx, "gets", layout.KV(key), time.Time{})
			return err
		}
	}
	errs, trips := e.together(t, get(0, "plain"), get(1, "ttl"), get(2, "absent"))
	if !slices.Equal(trips, []string{"evalsha"}) {
		t.Errorf("three Gets made together sent %v, want one script call", trips)
	}
	if errs[0] != nil || string(recs[0].Value) != "1" || !recs[0].ExpiresAt.IsZero() {
		t.Errorf("plain: %+v, %v", recs[0], errs[0])
	}
	if errs[1] != nil || string(recs[1].Value) != "2" || recs[1].ExpiresAt.Before(time.Now().Add(50*time.Minute)) {
		t.Errorf("ttl: %+v, %v", recs[1], errs[1])
	}
	if !errors.Is(errs[2], backend.ErrNotFound) {
		t.Errorf("absent: %+v, %v; want ErrNotFound", recs[2], errs[2])
	}
}
