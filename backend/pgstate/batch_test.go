package pgstate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/internal/layout"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestConformanceOneWriterPerKind runs the conformance suite with one
// writer per kind: every set, lease call or claim made while another of its
// kind is in flight waits and goes in a batch, so that the suite's races
// and models run through batches.
func TestConformanceOneWriterPerKind(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
		defer cancel()
		return newOneWriterDriver(t, ctx, nil)
	})
}

// batchLog is a pgx tracer recording the size of each batch of calls of the
// claim, set and lease functions sent, and how many calls of them were
// sent alone.
type batchLog struct {
	mu      sync.Mutex
	sizes   map[string][]int // by function
	singles map[string]int
}

// functions are the functions whose calls go in batches, as a batchLog
// names them.
var functions = []string{".claim_run(", ".set(", ".lease("}

func (l *batchLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	for _, fn := range functions {
		if strings.HasPrefix(d.SQL, "SELECT") && strings.Contains(d.SQL, fn) {
			l.mu.Lock()
			l.singles[fn]++
			l.mu.Unlock()
		}
	}
	return ctx
}
func (l *batchLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData)     {}
func (l *batchLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (l *batchLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (l *batchLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, fn := range functions {
		n := 0
		for _, q := range d.Batch.QueuedQueries {
			if strings.Contains(q.SQL, fn) {
				n++
			}
		}
		if n > 0 {
			l.mu.Lock()
			l.sizes[fn] = append(l.sizes[fn], n)
			l.mu.Unlock()
		}
	}
	return ctx
}

// of returns the sizes of the batches of function fn (".claim_run(" and so
// on), and how many of its calls went alone.
func (l *batchLog) of(fn string) ([]int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.sizes[fn]), l.singles[fn]
}

// batchEnv is a driver with one writer per kind over a pool whose batches
// are logged, a store over it, and a pool of its own for the test's locks.
type batchEnv struct {
	d    *Driver
	st   *state.Store
	log  *batchLog
	side *pgxpool.Pool
}

// newOneWriterDriver returns a driver with one writer per kind, in a
// schema of its own, over a pool of its own traced by tracer (if not nil).
func newOneWriterDriver(t testing.TB, ctx context.Context, tracer pgx.QueryTracer) *Driver {
	t.Helper()
	u := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(pgtest.WithParams(t, u, "pool_max_conns=8"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := New(ctx, pool, &Options{Schema: pgtest.Schema(t, u), Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func newBatchEnv(t testing.TB, ctx context.Context, ns string) *batchEnv {
	t.Helper()
	e := &batchEnv{log: &batchLog{sizes: map[string][]int{}, singles: map[string]int{}}}
	e.d = newOneWriterDriver(t, ctx, e.log)
	var err error
	if e.st, err = state.New(e.d, &state.Options{SweepInterval: -1, Namespace: ns}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.st.Close() })
	if e.side, err = pgxpool.New(ctx, pgtest.URL(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.side.Close)
	return e
}

// hold takes the advisory lock of key in namespace ns in a transaction of
// its own, so that a write of key waits, and returns what ends it.
func (e *batchEnv) hold(t *testing.T, ctx context.Context, ns, key string) func() {
	t.Helper()
	tx, err := e.side.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, e.d.lockKey(ns, key)); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	end := func() { once.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(end)
	return end
}

// waitUntil polls cond until it holds, failing the test after pgtest.Wait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(pgtest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", pgtest.Wait, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// state returns how many calls wait in b and how many senders run.
func (b *batcher[Q, R]) state() (queued, busy int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue), b.busy
}

// sending waits until b's one sender has taken every call made so far.
func sending[Q, R any](t *testing.T, b *batcher[Q, R]) {
	t.Helper()
	waitUntil(t, "the sender to take its call", func() bool { q, busy := b.state(); return q == 0 && busy == 1 })
}

// queue makes calls in goroutines, one after another once the one before
// waits in b, so that they wait in the order given, and returns their
// errors' channels in that order.
func queue[Q, R any](t *testing.T, b *batcher[Q, R], calls ...func() error) []chan error {
	t.Helper()
	out := make([]chan error, len(calls))
	for i, call := range calls {
		out[i] = make(chan error, 1)
		go func() { out[i] <- call() }()
		waitUntil(t, "a call to wait", func() bool { q, _ := b.state(); return q == i+1 })
	}
	return out
}

// result waits for one call's error.
func result(t *testing.T, ch chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(pgtest.Wait):
		t.Fatalf("a call did not return within %v", pgtest.Wait)
		return nil
	}
}

// runs creates n runs and returns their ids.
func (e *batchEnv) runs(t *testing.T, ctx context.Context, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		r, err := e.st.CreateRun(ctx, "job", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	return ids
}

// occupy keeps b's one sender busy: it holds the lock of key (in namespace
// ns), makes call, a write of key that waits for it, and waits until the
// sender has taken the call, so that calls of b's kind made meanwhile
// wait in b. free ends the hold and checks that call succeeded.
func occupy[Q, R any](t *testing.T, ctx context.Context, e *batchEnv, b *batcher[Q, R], ns, key string,
	call func() error) (free func()) {
	t.Helper()
	release := e.hold(t, ctx, ns, key)
	first := make(chan error, 1)
	go func() { first <- call() }()
	sending(t, b)
	return func() {
		t.Helper()
		release()
		if err := result(t, first); err != nil {
			t.Fatal(err)
		}
	}
}

// occupyClaims keeps the claim sender busy with a claim of run id.
func (e *batchEnv) occupyClaims(t *testing.T, ctx context.Context, id string) (free func()) {
	t.Helper()
	return occupy(t, ctx, e, e.d.claims, "ns", layout.Run(id), func() error {
		_, err := e.st.ClaimRun(ctx, id, "a")
		return err
	})
}

// claimTogether claims run first while agent x's claims of runs ids wait
// (in that order), so that they go in one batch once first's claim is
// done, and returns their errors' channels.
func (e *batchEnv) claimTogether(t *testing.T, ctx context.Context, first string, ids ...string) []chan error {
	t.Helper()
	free := e.occupyClaims(t, ctx, first)
	calls := make([]func() error, len(ids))
	for i, id := range ids {
		calls[i] = func() error { _, err := e.st.ClaimRun(ctx, id, "x"); return err }
	}
	errs := queue(t, e.d.claims, calls...)
	free()
	return errs
}

// TestCallsMadeTogetherGoInOneBatch holds the one claim sender on a run's
// lock and makes claims meanwhile (two of one run, a child's): they wait,
// go in one batch of one round trip when the sender is free, and each gets
// the answer it would get alone, in the order made.
func TestCallsMadeTogetherGoInOneBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	ids := e.runs(t, ctx, 3)
	parent, err := e.st.CreateRun(ctx, "parent", nil)
	if err != nil {
		t.Fatal(err)
	}
	child, err := e.st.CreateRun(ctx, "child", nil, state.WithParent(parent.ID))
	if err != nil {
		t.Fatal(err)
	}
	free := e.occupyClaims(t, ctx, ids[0])
	claim := func(id, agent string, fence *int64) func() error {
		return func() error {
			c, err := e.st.ClaimRun(ctx, id, agent)
			*fence = c.Fence
			return err
		}
	}
	fences := make([]int64, 4)
	errs := queue(t, e.d.claims,
		claim(ids[1], "x", &fences[0]),
		claim(ids[1], "y", &fences[1]), // after x, in the same batch: held
		claim(ids[2], "x", &fences[2]),
		claim(child.ID, "x", &fences[3])) // needs a second call: after the batch, alone
	free()
	for i, want := range []error{nil, state.ErrClaimed, nil, nil} {
		if err := result(t, errs[i]); !errors.Is(err, want) && err != want {
			t.Errorf("claim %d: got %v, want %v", i, err, want)
		}
	}
	if fences[0] != 1 || fences[2] != 1 || fences[3] != 1 {
		t.Errorf("fences %v: each fresh claim's must be 1", fences)
	}
	r, err := e.st.GetRun(ctx, ids[1])
	if err != nil || r.AgentID != "x" {
		t.Errorf("run claimed by %q (%v), want x, who asked first", r.AgentID, err)
	}
	p, err := e.st.GetRun(ctx, parent.ID)
	if err != nil || p.Children[state.StatusClaimed] != 1 {
		t.Errorf("parent counts %v claimed children (%v), want 1", p.Children, err)
	}
	// Alone: the first claim, and the child's second call.
	if got, alone := e.log.of(".claim_run("); !slices.Equal(got, []int{4}) || alone != 2 {
		t.Errorf("claim batches sent: %v and %d alone, want one of 4 and 2 alone", got, alone)
	}
}

// TestSetsAndLeasesKeepTheirOrderInABatch batches sets and lease calls the
// same way: of two conditional sets of one key, and two acquisitions of
// one resource, the first made wins.
func TestSetsAndLeasesKeepTheirOrderInABatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	free := occupy(t, ctx, e, e.d.sets, "ns", layout.KV("blocker"), func() error {
		_, err := e.st.Set(ctx, "blocker", 1)
		return err
	})
	set := func(key string, v int) func() error {
		return func() error { _, err := e.st.Set(ctx, key, v, state.IfVersion(0)); return err }
	}
	errs := queue(t, e.d.sets, set("k", 1), set("k", 2), set("other", 3))
	free()
	for i, want := range []error{nil, state.ErrConflict, nil} {
		if err := result(t, errs[i]); !errors.Is(err, want) && err != want {
			t.Errorf("set %d: got %v, want %v", i, err, want)
		}
	}
	if got, err := e.st.Get(ctx, "k"); err != nil || string(got.Value) != "1" {
		t.Errorf("k is %s (%v), want the first set's 1", got.Value, err)
	}

	free = occupy(t, ctx, e, e.d.leases, "ns", layout.Lease("blocker"), func() error {
		_, err := e.st.TryAcquireLease(ctx, "blocker", "h", time.Minute)
		return err
	})
	holders := make([]string, 2)
	acquire := func(h string, i int) func() error {
		return func() error {
			l, err := e.st.TryAcquireLease(ctx, "r", h, time.Minute)
			holders[i] = l.Holder
			return err
		}
	}
	errs = queue(t, e.d.leases, acquire("h1", 0), acquire("h2", 1))
	free()
	if err := result(t, errs[0]); err != nil || holders[0] != "h1" {
		t.Errorf("first acquisition: %v, holder %q", err, holders[0])
	}
	if err := result(t, errs[1]); !errors.Is(err, state.ErrLeaseHeld) {
		t.Errorf("second acquisition: got %v, want ErrLeaseHeld", err)
	}
	s, _ := e.log.of(".set(")
	l, _ := e.log.of(".lease(")
	if !slices.Equal(s, []int{3}) || !slices.Equal(l, []int{2}) {
		t.Errorf("set batches %v, lease batches %v: want one of 3 and one of 2", s, l)
	}
}

// TestAStatementFailingInABatchFailsOnlyItsCall corrupts the columns of a
// run, which the claim function refuses to read, and claims it in a batch
// with good runs: the server fails the batch, which commits nothing, and
// each claim is sent again alone: the good ones succeed, the bad one fails
// on its own.
func TestAStatementFailingInABatchFailsOnlyItsCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	ids := e.runs(t, ctx, 4)
	if _, err := e.side.Exec(ctx, `UPDATE `+e.d.q.s+`.records SET run_status = NULL WHERE ns = 'ns' AND key = $1`,
		[]byte(backend.RunKey(ids[2]))); err != nil {
		t.Fatal(err)
	}
	errs := e.claimTogether(t, ctx, ids[0], ids[1:]...)
	for i, bad := range []bool{false, true, false} {
		err := result(t, errs[i])
		if (err != nil) != bad {
			t.Errorf("claim of run %d: %v", i+1, err)
		}
		t.Logf("claim of run %d: %v", i+1, err)
	}
	for _, id := range []string{ids[1], ids[3]} {
		if r, err := e.st.GetRun(ctx, id); err != nil || r.AgentID != "x" || r.Fence != 1 {
			t.Errorf("run %s: agent %q fence %d (%v), want claimed once by x", id, r.AgentID, r.Fence, err)
		}
	}
	if got, alone := e.log.of(".claim_run("); !slices.Equal(got, []int{3}) || alone != 1+3 {
		t.Errorf("claim batches sent: %v and %d alone, want one of 3, then each of its claims alone", got, alone)
	}
}

// TestABatchWhoseSessionEndsFailsEveryCall ends the server session of a
// batch while it waits for a lock mid-way: the batch may not be known to
// have rolled back, so no call is sent again; each gets an error, and
// nothing of the batch was written.
func TestABatchWhoseSessionEndsFailsEveryCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	ids := e.runs(t, ctx, 4)
	releaseMid := e.hold(t, ctx, "ns", layout.Run(ids[2]))
	errs := e.claimTogether(t, ctx, ids[0], ids[1:]...)
	// The batch now waits for the lock of run 2: end its session.
	waitUntil(t, "the batch to wait for a lock", func() bool {
		var n int
		_ = e.side.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n)
		return n == 1
	})
	if _, err := e.side.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`); err != nil {
		t.Fatal(err)
	}
	for i := range errs {
		err := result(t, errs[i])
		if err == nil {
			t.Errorf("claim of run %d succeeded in a batch whose session ended", i+1)
		}
		t.Logf("claim of run %d: %v", i+1, err)
	}
	if got, alone := e.log.of(".claim_run("); !slices.Equal(got, []int{3}) || alone != 1 {
		t.Errorf("claim batches sent: %v and %d alone, want one of 3 and none of its claims again", got, alone)
	}
	releaseMid()
	for _, id := range ids[1:] {
		if r, err := e.st.GetRun(ctx, id); err != nil || r.AgentID != "" || r.Fence != 0 {
			t.Errorf("run %s: agent %q fence %d (%v), want unclaimed", id, r.AgentID, r.Fence, err)
		}
	}
}

// TestACallerLeavesTheQueueWhenItsContextEnds ends the contexts of calls
// waiting behind a busy sender: they return at once with their context's
// error, and are never sent.
func TestACallerLeavesTheQueueWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	ids := e.runs(t, ctx, 3)
	free := e.occupyClaims(t, ctx, ids[0])
	cctx, stop := context.WithCancel(ctx)
	dctx, stopD := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stopD()
	errs := queue(t, e.d.claims,
		func() error { _, err := e.st.ClaimRun(cctx, ids[1], "x"); return err },
		func() error { _, err := e.st.ClaimRun(dctx, ids[2], "x"); return err })
	stop()
	if err := result(t, errs[0]); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: got %v, want context.Canceled", err)
	}
	if err := result(t, errs[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("call past its deadline: got %v, want context.DeadlineExceeded", err)
	}
	free()
	waitUntil(t, "the sender to stop", func() bool { q, busy := e.d.claims.state(); return q == 0 && busy == 0 })
	for _, id := range ids[1:] {
		if r, err := e.st.GetRun(ctx, id); err != nil || r.AgentID != "" {
			t.Errorf("run %s claimed by %q (%v) after its caller left", id, r.AgentID, err)
		}
	}
	if got, alone := e.log.of(".claim_run("); len(got) != 0 || alone != 1 {
		t.Errorf("claim batches sent: %v and %d alone, want only the first claim", got, alone)
	}
}

// TestABatchHoldsOneNamespace makes calls of two namespaces wait together:
// each batch holds calls of one namespace only (a writer announces its
// revisions per namespace, see draw).
func TestABatchHoldsOneNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "one")
	other, err := state.New(e.d, &state.Options{SweepInterval: -1, Namespace: "two"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	free := occupy(t, ctx, e, e.d.sets, "one", layout.KV("blocker"), func() error {
		_, err := e.st.Set(ctx, "blocker", 1)
		return err
	})
	set := func(st *state.Store, key string) func() error {
		return func() error { _, err := st.Set(ctx, key, 1); return err }
	}
	errs := queue(t, e.d.sets, set(e.st, "a"), set(other, "b"), set(e.st, "c"), set(other, "d"), set(other, "e"))
	free()
	for _, ch := range errs {
		if err := result(t, ch); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := e.log.of(".set(")
	slices.Sort(got)
	if !slices.Equal(got, []int{2, 3}) {
		t.Errorf("set batches: %v, want one of 2 (namespace one) and one of 3 (two)", got)
	}
}

// TestBatchingOptions reads the driver's batching settings from its
// options and its URL, and refuses bad ones, naming them.
func TestBatchingOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	u := pgtest.URL(t)
	schema := pgtest.Schema(t, u)
	for _, c := range []struct {
		params        []string
		writers, most int
	}{
		{[]string{"pool_max_conns=10"}, 5, DefaultMaxBatch},
		{[]string{"pool_max_conns=1"}, 1, DefaultMaxBatch},
		{[]string{"writers=3", "max_batch=5"}, 3, 5},
		{[]string{"max_batch=1", "pool_max_conns=6"}, 3, 1},
	} {
		d, err := Open(ctx, pgtest.WithParams(t, u, append(c.params, "schema="+schema)...), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []struct{ limit, max int }{{d.claims.limit, d.claims.max}, {d.sets.limit, d.sets.max},
			{d.leases.limit, d.leases.max}} {
			if b.limit != c.writers || b.max != c.most {
				t.Errorf("%v: writers %d, max batch %d; want %d, %d", c.params, b.limit, b.max, c.writers, c.most)
			}
		}
		_ = d.Close()
	}
	for _, bad := range []string{"writers=0", "writers=many", "max_batch=-1", "max_batch="} {
		_, err := Open(ctx, pgtest.WithParams(t, u, bad, "schema="+schema), nil)
		if name := bad[:strings.Index(bad, "=")]; err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v, want an error naming %s", bad, err, name)
		}
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := New(ctx, pool, &Options{Schema: schema, Writers: -1}); err == nil || !strings.Contains(err.Error(), "Writers") {
		t.Errorf("Writers -1: got %v, want an error naming Writers", err)
	}
}

// TestABatchOfClaimsLocksItsRunsFirst holds the later (by lock) of two
// runs a batch claims: the batch waits for it holding the earlier run's
// lock but not yet the lock of the counter of claimed runs, which its
// first claim would take: a batch never holds the counter while it waits
// for a run (see batcher).
func TestABatchOfClaimsLocksItsRunsFirst(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	e := newBatchEnv(t, ctx, "ns")
	ids := e.runs(t, ctx, 3)
	lock := func(id string) int64 { return e.d.lockKey("ns", layout.Run(id)) }
	if lock(ids[1]) > lock(ids[2]) {
		ids[1], ids[2] = ids[2], ids[1]
	}
	releaseLater := e.hold(t, ctx, "ns", layout.Run(ids[2]))
	errs := e.claimTogether(t, ctx, ids[0], ids[2], ids[1])
	var pid int32
	waitUntil(t, "the batch to wait for the later run's lock", func() bool {
		err := e.side.QueryRow(ctx, `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&pid)
		return err == nil
	})
	held := func(l int64) bool {
		var n int
		if err := e.side.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
			AND pid = $1 AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $2`, pid, l).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	if !held(lock(ids[1])) {
		t.Error("the waiting batch does not hold the earlier run's lock")
	}
	if held(e.d.lockKey("ns", countClaimed)) {
		t.Error("the batch holds the counter of claimed runs while it waits for a run")
	}
	releaseLater()
	for i := range errs {
		if err := result(t, errs[i]); err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
	}
}

// panicKind is a kind of call whose every call panics.
type panicKind struct{}

func (panicKind) single(context.Context, querier, int) (int, error) { panic("boom") }
func (panicKind) queue(*pgx.Batch, int)                             { panic("boom") }
func (panicKind) scan(pgx.Row, int) (int, bool, error)              { panic("boom") }

// TestAPanicInASenderIsTheCallsError checks that a call that panics in the
// batcher (a bug) reaches its caller as an error, and leaves the batcher
// working: no panic ends the process from a sender's goroutine.
func TestAPanicInASenderIsTheCallsError(t *testing.T) {
	b := newBatcher(&Driver{}, batchKind[int, int](panicKind{}), 1, 4)
	for range 2 {
		_, err := b.do(context.Background(), "ns", 1, 0)
		if err == nil || !strings.Contains(err.Error(), "internal error: boom") {
			t.Fatalf("got %v, want the panic as an error", err)
		}
		if q, busy := b.state(); q != 0 || busy != 0 {
			t.Fatalf("after the call: %d waiting, %d senders", q, busy)
		}
	}
}

// TestABatchRunsUntilItsLastCallersDeadline checks the context a batch is
// sent with: its first call's values, the latest of its calls' deadlines
// (none when one caller has none), and no caller's cancellation.
func TestABatchRunsUntilItsLastCallersDeadline(t *testing.T) {
	type key struct{}
	now := time.Now()
	first, stop := context.WithDeadline(context.WithValue(context.Background(), key{}, "first"), now.Add(time.Minute))
	later, stopLater := context.WithDeadline(context.Background(), now.Add(time.Hour))
	defer stopLater()
	call := func(ctx context.Context) *pending[int, int] { return &pending[int, int]{ctx: ctx} }

	ctx, cancel := batchCtx([]*pending[int, int]{call(first), call(later)})
	defer cancel()
	stop() // the first caller leaves
	if d, ok := ctx.Deadline(); !ok || !d.Equal(now.Add(time.Hour)) {
		t.Errorf("deadline %v (%v), want the later caller's %v", d, ok, now.Add(time.Hour))
	}
	if ctx.Err() != nil || ctx.Value(key{}) != "first" {
		t.Errorf("err %v, value %v: want no cancellation and the first call's values", ctx.Err(), ctx.Value(key{}))
	}
	ctx, cancel = batchCtx([]*pending[int, int]{call(later), call(context.Background())})
	defer cancel()
	if d, ok := ctx.Deadline(); ok {
		t.Errorf("deadline %v, want none: one caller waits without one", d)
	}
}
