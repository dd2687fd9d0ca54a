package redisstate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
)

// TestOutageFailsPromptlyAndRecovers runs a store over a redis-server of its
// own (on a spare loopback port), then kills the server, freezes it, and
// brings it back: calls fail with an error naming the cause, never past
// their deadline, and succeed again once Redis is back, with nothing
// restarted on the client side.
func TestOutageFailsPromptlyAndRecovers(t *testing.T) {
	is := is.New(t)
	srv := redistest.Start(t)
	d, err := redisstate.Open(ctx, srv.URL())
	is.NoErr(err)
	st, err := state.New(d, &state.Options{SweepInterval: -1}) // Redis's clock, as in production
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run := seed(t, st)

	calls := map[string]func(ctx context.Context) error{
		"set":     func(ctx context.Context) error { _, err := st.Set(ctx, "k", 2); return err },
		"get":     func(ctx context.Context) error { _, err := st.Get(ctx, "k"); return err },
		"claim":   func(ctx context.Context) error { _, err := st.ClaimRun(ctx, run, "A"); return err },
		"acquire": func(ctx context.Context) error { _, err := st.TryAcquireLease(ctx, "l", "A", time.Minute); return err },
		"list":    func(ctx context.Context) error { _, err := st.List(ctx, ""); return err },
		"history": func(ctx context.Context) error { _, err := st.History(ctx, state.HistoryQuery{}); return err },
		"health":  func(ctx context.Context) error { _, err := st.Health(ctx); return err },
	}

	srv.Stop() // Redis is down: connections are refused.
	for name, call := range calls {
		// A generous deadline: the call must fail on its own, long before it.
		cctx, cancel := context.WithTimeout(ctx, redistest.Wait)
		err := call(cctx)
		ended := cctx.Err()
		cancel()
		t.Logf("%s while down: %v", name, err)
		is.True(err != nil)                                    // a call while Redis is down fails
		is.True(ended == nil)                                  // promptly: it does not wait for its deadline
		is.True(strings.Contains(err.Error(), srv.Addr()))     // and the error names the server
		is.True(strings.Contains(err.Error(), "redisstate: ")) // and the operation
	}
	h, err := st.Health(ctx)
	is.True(err != nil && strings.HasPrefix(h.Status, "error: ")) // health reports the outage

	srv.Restart() // Redis is back (empty: it persists nothing in this test).
	waitUntil(t, func() bool { _, err := st.Set(ctx, "k", 3); return err == nil })
	run = seed(t, st)
	for name, call := range calls {
		if err := call(ctx); err != nil && !errors.Is(err, state.ErrClaimed) && !errors.Is(err, state.ErrLeaseHeld) {
			t.Errorf("%s after Redis came back: %v", name, err) // every call works again
		}
	}

	srv.Pause() // Redis hangs: it accepts nothing and answers nothing.
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call(cctx) }()
		select {
		case err := <-done:
			t.Logf("%s while hung: %v", name, err)
			is.True(err != nil)                                    // a call to a hung Redis fails
			is.True(errors.Is(err, context.DeadlineExceeded))      // at its deadline, saying so
			is.True(strings.Contains(err.Error(), "redisstate: ")) // naming the operation
		case <-time.After(redistest.Wait):
			t.Fatalf("%s hangs on a hung Redis past its deadline", name)
		}
		cancel()
	}
	srv.Resume()
	waitUntil(t, func() bool { _, err := st.Set(ctx, "k", 4); return err == nil })
	for name, call := range calls {
		if err := call(ctx); err != nil && !errors.Is(err, state.ErrClaimed) && !errors.Is(err, state.ErrLeaseHeld) {
			t.Errorf("%s after Redis resumed: %v", name, err)
		}
	}
}

// TestOpenOfUnreachableRedisFailsPromptly checks that Open reports a server
// that is not there, naming it, rather than returning a driver that fails
// later.
func TestOpenOfUnreachableRedisFailsPromptly(t *testing.T) {
	is := is.New(t)
	addr := "127.0.0.1:" + itoa(redistest.FreePort(t, false))
	cctx, cancel := context.WithTimeout(ctx, redistest.Wait)
	defer cancel()
	_, err := redisstate.Open(cctx, "redis://"+addr+"/0")
	is.True(err != nil)
	is.True(cctx.Err() == nil) // promptly
	is.True(strings.Contains(err.Error(), addr))
	t.Log(err)
}

// seed writes what the calls of the outage test read, and returns a run id.
func seed(t *testing.T, st *state.Store) string {
	t.Helper()
	if _, err := st.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	r, err := st.CreateRun(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// waitUntil polls cond until it holds, failing the test after
// redistest.Wait.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(redistest.Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition still false after %v", redistest.Wait)
		}
		time.Sleep(20 * time.Millisecond) // polling a server coming back
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
