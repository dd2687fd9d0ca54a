package pgstate_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
)

// openOn opens a store (the database's clock, as in production) over a
// throwaway cluster.
func openOn(t *testing.T, c *pgtest.Cluster) *state.Store {
	t.Helper()
	d, err := pgstate.Open(ctx, c.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// load runs writers (a Set, a Get and a lease acquire each time round)
// until stop is closed, with a deadline of perCall on every call. It
// records every acknowledged Set (key → value) and how far past its
// deadline any call returned.
type load struct {
	acked   sync.Map // key → the last acknowledged value
	ok      atomic.Int64
	failed  atomic.Int64
	overrun atomic.Int64 // the worst time a call took past its deadline, ns
	mu      sync.Mutex
	errs    map[string]int // error texts seen, with counts
}

func runLoad(st *state.Store, workers int, perCall time.Duration, stop <-chan struct{}) (*load, *sync.WaitGroup) {
	l := &load{errs: map[string]int{}}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("w%d/%d", w, i%50)
				l.call(perCall, func(ctx context.Context) error {
					_, err := st.Set(ctx, key, i)
					if err == nil {
						l.acked.Store(key, i)
					}
					return err
				})
				l.call(perCall, func(ctx context.Context) error { _, err := st.Get(ctx, key); return err })
				l.call(perCall, func(ctx context.Context) error {
					_, err := st.TryAcquireLease(ctx, fmt.Sprintf("lease-%d", w), "holder", time.Minute)
					return err
				})
			}
		})
	}
	return l, &wg
}

var quoted = regexp.MustCompile(`"[^"]*"`)

func (l *load) call(perCall time.Duration, f func(ctx context.Context) error) {
	cctx, cancel := context.WithTimeout(ctx, perCall)
	defer cancel()
	start := time.Now()
	err := f(cctx)
	if over := time.Since(start) - perCall; over > time.Duration(l.overrun.Load()) {
		l.overrun.Store(int64(over))
	}
	if err == nil || errors.Is(err, state.ErrNotFound) {
		l.ok.Add(1)
		return
	}
	l.failed.Add(1)
	l.mu.Lock()
	msg := quoted.ReplaceAllString(err.Error(), `"…"`) // one line per kind of error, whatever the key
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	l.errs[msg]++
	l.mu.Unlock()
}

// TestOutageUnderLoad stops a throwaway cluster in immediate mode (as a
// crash would) while writers run: calls fail with errors naming the
// operation, never past their deadline; after the cluster restarts the same
// store works again, nothing restarted on the client side, and every write
// that was acknowledged before the crash is there (crash recovery from the
// WAL, with the default synchronous_commit=on).
func TestOutageUnderLoad(t *testing.T) {
	is := is.New(t)
	c := pgtest.Start(t)
	st := openOn(t, c)
	const perCall = 2 * time.Second
	// A call may finish a little after its deadline on a busy machine (the
	// scheduler); it must not wait for the server (whose driver-level bound
	// is 30s).
	const slack = 5 * time.Second

	stop := make(chan struct{})
	l, wg := runLoad(st, 8, perCall, stop)
	pgtest.WaitUntil(t, func() bool { return l.ok.Load() > 200 })
	c.Stop("immediate")
	okAtCrash := l.ok.Load()
	pgtest.WaitUntil(t, func() bool { return l.failed.Load() > 50 })
	is.True(time.Duration(l.overrun.Load()) < slack) // no call waits past its deadline while the server is down

	// The writes acknowledged so far: all must survive the crash.
	acked := map[string]int{}
	l.acked.Range(func(k, v any) bool { acked[k.(string)] = v.(int); return true })
	c.Restart()
	pgtest.WaitUntil(t, func() bool { return l.ok.Load() > okAtCrash+200 }) // the same store works again
	close(stop)
	wg.Wait()
	is.True(time.Duration(l.overrun.Load()) < slack) // nor while it comes back
	l.mu.Lock()
	for msg, n := range l.errs {
		t.Logf("%d× %s", n, msg)
		is.True(strings.HasPrefix(msg, "state: ") && strings.Contains(msg, "pgstate: ")) // errors name the operation and the driver
	}
	l.mu.Unlock()
	t.Logf("%d calls succeeded, %d failed during the outage; %d acknowledged writes checked; worst overrun %v",
		l.ok.Load(), l.failed.Load(), len(acked), time.Duration(l.overrun.Load()))
	for k, v := range acked {
		e, err := st.Get(ctx, k)
		is.NoErr(err) // an acknowledged write survives an immediate shutdown
		var got int
		_, _ = fmt.Sscan(string(e.Value), &got)
		is.True(got >= v) // with its value or a later one
	}
}

// TestHungServerFailsAtTheDeadline freezes a throwaway cluster (it accepts
// connections and answers nothing): calls fail at their deadline, saying
// so, and work again once it resumes.
func TestHungServerFailsAtTheDeadline(t *testing.T) {
	is := is.New(t)
	c := pgtest.Start(t)
	st := openOn(t, c)
	if _, err := st.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(ctx context.Context) error{
		"set":     func(ctx context.Context) error { _, err := st.Set(ctx, "k", 2); return err },
		"get":     func(ctx context.Context) error { _, err := st.Get(ctx, "k"); return err },
		"acquire": func(ctx context.Context) error { _, err := st.TryAcquireLease(ctx, "l", "A", time.Minute); return err },
		"list":    func(ctx context.Context) error { _, err := st.List(ctx, ""); return err },
		"history": func(ctx context.Context) error { _, err := st.History(ctx, state.HistoryQuery{}); return err },
		"health":  func(ctx context.Context) error { _, err := st.Health(ctx); return err },
	}
	d, err := pgstate.Open(ctx, pgtest.WithParams(t, c.URL(), "timeout=1s"), nil)
	is.NoErr(err)
	defer d.Close()
	c.Pause()
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call(cctx) }()
		select {
		case err := <-done:
			t.Logf("%s while hung: %v", name, err)
			is.True(errors.Is(err, context.DeadlineExceeded))   // a call to a hung server fails at its deadline, saying so
			is.True(strings.Contains(err.Error(), "pgstate: ")) // naming the driver
		case <-time.After(pgtest.Wait):
			t.Fatalf("%s hangs on a hung server past its deadline", name)
		}
		cancel()
	}
	// A call without a deadline of its own fails after the driver's
	// Timeout (here 1s, from the URL).
	done := make(chan error, 1)
	go func() { _, err := d.Get(context.Background(), "default", "k", time.Time{}); done <- err }()
	select {
	case err := <-done:
		t.Logf("get without a deadline while hung: %v", err)
		is.True(err != nil && strings.Contains(err.Error(), "did not answer in time")) // it fails, saying why
	case <-time.After(pgtest.Wait):
		t.Fatal("a call without a deadline hangs on a hung server past the driver's timeout")
	}
	c.Resume()
	pgtest.WaitUntil(t, func() bool { _, err := st.Set(ctx, "k", 3); return err == nil })
	for name, call := range calls {
		if err := call(ctx); err != nil && !errors.Is(err, state.ErrLeaseHeld) {
			t.Errorf("%s after the server resumed: %v", name, err)
		}
	}
}

// TestRevisionsSurviveFailover starts a copy of the database taken before
// the latest writes (a base backup: what a failover to a replica that had
// not received them, or a restore, brings back) and checks that fences and
// versions handed out afterwards are above every one handed out before,
// although the copy's sequences are behind.
func TestRevisionsSurviveFailover(t *testing.T) {
	is := is.New(t)
	primary := pgtest.Start(t)
	st := openOn(t, primary)
	l, err := st.TryAcquireLease(ctx, "res", "A", time.Minute)
	is.NoErr(err)
	e, err := st.Set(ctx, "k", 1)
	is.NoErr(err)
	t.Logf("before the backup: fence %d, version %d", l.Fence, e.Version)
	replica := primary.Backup()
	var lastFence, lastVersion int64
	for i := range 20 { // writes the copy never sees
		_, err := st.ReleaseLease(ctx, "res", "A")
		is.NoErr(err)
		l, err = st.TryAcquireLease(ctx, "res", "A", time.Minute)
		is.NoErr(err)
		e, err = st.Set(ctx, "k", i)
		is.NoErr(err)
		lastFence, lastVersion = l.Fence, e.Version
	}
	is.NoErr(st.Close())
	primary.Stop("immediate")
	replica.Restart() // the failover
	st2 := openOn(t, replica)
	_, err = st2.ReleaseLease(ctx, "res", "A") // the copy still has A's first tenure
	is.NoErr(err)
	l2, err := st2.TryAcquireLease(ctx, "res", "B", time.Minute)
	is.NoErr(err)
	e2, err := st2.Set(ctx, "k", 100)
	is.NoErr(err)
	t.Logf("last before the failover: fence %d, version %d; after: fence %d, version %d", lastFence, lastVersion, l2.Fence, e2.Version)
	is.True(l2.Fence > lastFence)     // a fence after the failover is above every fence before it
	is.True(e2.Version > lastVersion) // and so is a version
}
