package state_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/statetest"
)

// leaseMode says what faultyLeases does to a lease write.
type leaseMode int

const (
	leasesWork        leaseMode = iota
	leasesHang                  // block until the call's context ends
	leasesHangForever           // block until the test ends, whatever the context
	leasesFail                  // fail at once with a transient error
)

// faultyLeases is a memory backend whose lease writes (the renewals of a
// KeepAlive) can hang or fail. It reports each one it receives.
type faultyLeases struct {
	*memstate.Driver
	mu       sync.Mutex
	mode     leaseMode
	calls    chan struct{} // one value per lease write
	released chan struct{} // closed when the test ends
	ended    chan error    // how each hanging write ended
}

func newFaultyLeases() *faultyLeases {
	d := &faultyLeases{Driver: memstate.New(), calls: make(chan struct{}, 100), released: make(chan struct{}),
		ended: make(chan error, 100)}
	return d
}

func (d *faultyLeases) set(m leaseMode) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mode = m
}

var errConnRefused = errors.New("dial tcp 10.0.0.9:6379: connection refused")

func (d *faultyLeases) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	if len(q.Keys) == 1 && strings.HasPrefix(q.Keys[0], "l/") {
		d.mu.Lock()
		m := d.mode
		d.mu.Unlock()
		if m != leasesWork {
			d.calls <- struct{}{}
		}
		switch m {
		case leasesHang:
			<-ctx.Done()
			d.ended <- ctx.Err()
			return backend.Result{}, ctx.Err()
		case leasesHangForever:
			<-d.released
			return backend.Result{}, errConnRefused
		case leasesFail:
			return backend.Result{}, errConnRefused
		}
	}
	return d.Driver.Update(ctx, q, fn)
}

func newKeepAliveStore(t *testing.T) (*state.Store, *statetest.Clock, *faultyLeases) {
	t.Helper()
	clk := statetest.NewClock()
	d := newFaultyLeases()
	st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	t.Cleanup(func() { close(d.released) }) // first: Close waits for a hung call
	return st, clk, d
}

// waitTimers waits until n timers wait on clk: the keep-alive is parked.
func waitTimers(t *testing.T, clk *statetest.Clock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), realWait)
	defer cancel()
	if err := clk.WaitTimers(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers on the clock (have %v): %v", n, clk.Timers(), err)
	}
}

func receive[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(realWait):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// acquire has holder "A" take resource for 30s.
func acquire(t *testing.T, st *state.Store, resource string) state.Lease {
	t.Helper()
	l, err := st.TryAcquireLease(context.Background(), resource, "A", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// stopped reports whether ka has stopped, without waiting.
func stopped(ka *state.KeepAlive) bool {
	select {
	case <-ka.Done():
		return true
	default:
		return false
	}
}

func TestKeepAliveEndsAtExpiryWhileARenewalHangs(t *testing.T) {
	for _, mode := range []leaseMode{leasesHang, leasesHangForever} {
		ctx := context.Background()
		st, clk, d := newKeepAliveStore(t)
		l := acquire(t, st, "r")
		ka := st.KeepAlive(ctx, l)
		waitTimers(t, clk, 2) // the expiry, and the first renewal
		d.set(mode)
		clk.Advance(10 * time.Second)
		receive(t, d.calls, "the first renewal")
		clk.Set(l.ExpiresAt.Add(-time.Millisecond))
		if stopped(ka) {
			t.Fatalf("mode %d: the keep-alive stopped before the lease's expiry: %v", mode, ka.Err())
		}
		clk.Set(l.ExpiresAt)
		receive(t, ka.Done(), "the keep-alive to stop at the lease's expiry while its renewal hangs")
		err := ka.Err()
		var le *state.LeaseExpiredError
		if !errors.Is(err, state.ErrNotHeld) || !errors.As(err, &le) || !le.ExpiresAt.Equal(l.ExpiresAt) {
			t.Errorf("mode %d: Err must say the lease expired at %v: %v", mode, l.ExpiresAt, err)
		}
		if mode == leasesHang {
			if err := receive(t, d.ended, "the hung renewal to be cancelled"); !errors.Is(err, context.Canceled) {
				t.Errorf("the hung renewal ended with %v, want it cancelled", err)
			}
		}
	}
}

func TestKeepAliveRetriesTransientErrorsWithGrowingPauses(t *testing.T) {
	ctx := context.Background()
	st, clk, d := newKeepAliveStore(t)
	l := acquire(t, st, "r")
	ka := st.KeepAlive(ctx, l)
	defer ka.Stop()
	waitTimers(t, clk, 2)
	d.set(leasesFail)
	clk.Advance(10 * time.Second)
	var gaps []time.Duration
	for i := range 4 {
		receive(t, d.calls, "a renewal attempt")
		waitTimers(t, clk, 2) // the expiry, and the next attempt
		if n := len(d.calls); n != 0 {
			t.Fatalf("attempt %d was followed by %d more without the clock moving: a tight loop", i+1, n)
		}
		next := clk.Timers()[0]
		gaps = append(gaps, next.Sub(clk.Now()))
		if i < 3 {
			clk.Set(next)
		}
	}
	for i, g := range gaps {
		if g <= 0 || (i > 0 && g < gaps[i-1]) {
			t.Fatalf("the pauses between failed renewals must be positive and grow: %v", gaps)
		}
	}
	if ka.Err() != nil {
		t.Fatalf("transient failures ended the keep-alive early: %v", ka.Err())
	}
	t.Logf("pauses between failed renewals of a 30s lease: %v", gaps)
	d.set(leasesWork) // the backend recovers: the next attempt renews
	clk.Set(clk.Timers()[0])
	waitTimers(t, clk, 2)
	if got := ka.Lease().ExpiresAt; !got.Equal(clk.Now().Truncate(time.Millisecond).Add(30 * time.Second)) {
		t.Errorf("after recovery the lease must be renewed to now+TTL, got %v (now %v)", got, clk.Now())
	}
}

func TestKeepAliveRejectsANonPositiveTTL(t *testing.T) {
	ctx := context.Background()
	st, _, _ := newKeepAliveStore(t)
	l := acquire(t, st, "r")
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		bad := l
		bad.TTL = ttl
		ka := st.KeepAlive(ctx, bad)
		if !stopped(ka) {
			t.Fatalf("a keep-alive of a lease with TTL %v must be refused at once", ttl)
		}
		var fe *state.FieldError
		if !errors.Is(ka.Err(), state.ErrInvalid) || !errors.As(ka.Err(), &fe) || fe.Field != "ttl" {
			t.Errorf("TTL %v: Err must be a *FieldError naming ttl: %v", ttl, ka.Err())
		}
	}
}

func TestKeepAliveEndsWhenTheStoreCloses(t *testing.T) {
	ctx := context.Background()
	st, clk, d := newKeepAliveStore(t)
	l := acquire(t, st, "r")
	idle := st.KeepAlive(ctx, l)
	l2 := acquire(t, st, "r2")
	busy := st.KeepAlive(ctx, l2)
	waitTimers(t, clk, 4)
	d.set(leasesHang)
	clk.Advance(10 * time.Second) // both renew; both renewals hang
	receive(t, d.calls, "a renewal")
	receive(t, d.calls, "a renewal")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ka := range []*state.KeepAlive{idle, busy} {
		if !stopped(ka) {
			t.Fatal("Close must stop every keep-alive before it returns")
		}
		if !errors.Is(ka.Err(), state.ErrClosed) {
			t.Errorf("a keep-alive stopped by Close must say so: %v", ka.Err())
		}
	}
}

func TestKeepAliveStopsWhenTheLeaseIsLost(t *testing.T) {
	ctx := context.Background()
	st, clk, _ := newKeepAliveStore(t)
	l := acquire(t, st, "r")
	ka := st.KeepAlive(ctx, l)
	waitTimers(t, clk, 2)
	if ok, err := st.ReleaseLease(ctx, "r", "A"); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if _, err := st.TryAcquireLease(ctx, "r", "B", time.Hour); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	receive(t, ka.Done(), "the keep-alive to stop when its renewal finds another holder")
	var ne *state.NotHeldError
	if !errors.As(ka.Err(), &ne) || ne.Holder != "B" {
		t.Errorf("Err must name the new holder: %v", ka.Err())
	}
}
