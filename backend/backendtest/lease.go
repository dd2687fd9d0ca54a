package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

// realWait bounds waits on real goroutines; it is generous because a busy
// two-core machine may be slow, and it is never reached when things work.
const realWait = 30 * time.Second

func leaseCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"AcquireRenewRelease", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			l, err := e.st.TryAcquireLease(ctx, "pr:42", "A", time.Minute)
			is.NoErr(err)
			is.True(l.Fence > 0)                            // acquire returns a fence token
			is.True(l.ExpiresAt.Equal(t0.Add(time.Minute))) // acquire returns the expiry
			e.clk.Advance(10 * time.Second)
			again, err := e.st.TryAcquireLease(ctx, "pr:42", "A", time.Minute)
			is.NoErr(err)                                            // the holder re-acquiring its live lease succeeds
			is.Equal(again.Fence, l.Fence)                           // and keeps its fence
			is.True(again.ExpiresAt.Equal(t0.Add(70 * time.Second))) // and extends it
			_, err = e.st.TryAcquireLease(ctx, "pr:42", "B", time.Minute)
			var he *state.HeldError
			is.True(errors.As(err, &he) && errors.Is(err, state.ErrLeaseHeld)) // another holder is refused
			is.Equal(he.Holder, "A")                                           // the refusal names the holder
			is.True(he.ExpiresAt.Equal(again.ExpiresAt))                       // and its expiry
			is.Equal(he.Error(), "Held by 'A'")
			_, err = e.st.RenewLease(ctx, "pr:42", "B", time.Minute)
			is.True(errors.Is(err, state.ErrNotHeld)) // only the holder can renew
			e.clk.Advance(5 * time.Second)
			rn, err := e.st.RenewLease(ctx, "pr:42", "A", 30*time.Second)
			is.NoErr(err)
			is.True(rn.ExpiresAt.Equal(e.clk.Now().Add(30 * time.Second))) // renew sets expiry to now + ttl
			is.Equal(rn.Fence, l.Fence)                                    // renew keeps the fence
			got, err := e.st.GetLease(ctx, "pr:42")
			is.NoErr(err)
			is.Equal(got.Holder, "A")
			is.Equal(got.Fence, l.Fence)
			ok, err := e.st.ReleaseLease(ctx, "pr:42", "B")
			is.NoErr(err)
			is.True(!ok) // a non-holder cannot release
			ok, err = e.st.ReleaseLease(ctx, "pr:42", "A")
			is.NoErr(err)
			is.True(ok) // the holder releases
			_, err = e.st.GetLease(ctx, "pr:42")
			is.True(errors.Is(err, state.ErrNotFound)) // a released lease is free
			b, err := e.st.TryAcquireLease(ctx, "pr:42", "B", time.Minute)
			is.NoErr(err)
			is.True(b.Fence > l.Fence) // a new tenure after release gets a greater fence
		}},
		{"ExpiredLeaseIsTakenOverWithAGreaterFence", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			a, err := e.st.TryAcquireLease(ctx, "r", "A", time.Second)
			is.NoErr(err)
			e.clk.Advance(time.Second)
			_, err = e.st.RenewLease(ctx, "r", "A", time.Second)
			is.True(errors.Is(err, state.ErrNotHeld)) // an expired lease cannot be renewed
			ok, err := e.st.ReleaseLease(ctx, "r", "A")
			is.NoErr(err)
			is.True(!ok) // releasing an expired lease reports false
			b, err := e.st.TryAcquireLease(ctx, "r", "B", time.Second)
			is.NoErr(err)
			is.True(b.Takeover)        // acquiring an expired lease of another holder is a takeover
			is.True(b.Fence > a.Fence) // a takeover gets a greater fence
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: "r", Limit: 1})
			is.NoErr(err)
			is.Equal(evs[0].Op, "lease.takeover") // a takeover is recorded as such
			e.clk.Advance(time.Second)
			a2, err := e.st.TryAcquireLease(ctx, "r", "A", time.Second)
			is.NoErr(err)
			is.True(a2.Fence > b.Fence) // every new tenure gets a greater fence
		}},
		{"FencesNeverDecreaseAcrossReset", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			a, err := e.st.TryAcquireLease(ctx, "r", "A", time.Minute)
			is.NoErr(err)
			_, err = e.st.Reset(ctx)
			is.NoErr(err)
			b, err := e.st.TryAcquireLease(ctx, "r", "B", time.Minute)
			is.NoErr(err)
			is.True(b.Fence > a.Fence) // fences keep increasing after a reset
		}},
		{"AcquireWaitsForRelease", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.TryAcquireLease(ctx, "r", "A", time.Hour)
			is.NoErr(err)
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			_, err = e.st.AcquireLease(short, "r", "B", time.Minute)
			cancel()
			is.True(errors.Is(err, context.DeadlineExceeded)) // a blocking acquire gives up when its context ends
			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, realWait)
				defer cancel()
				_, err := e.st.AcquireLease(wctx, "r", "B", time.Minute)
				got <- err
			}()
			ok, err := e.st.ReleaseLease(ctx, "r", "A")
			is.NoErr(err)
			is.True(ok)
			is.NoErr(<-got) // a blocking acquire gets the lease once it is released
			l, err := e.st.GetLease(ctx, "r")
			is.NoErr(err)
			is.Equal(l.Holder, "B")
		}},
		{"KeepAliveRenewsAndReportsLoss", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			wctx, cancel := context.WithTimeout(ctx, realWait)
			defer cancel()
			l, err := e.st.TryAcquireLease(ctx, "r", "A", 30*time.Second)
			is.NoErr(err)
			ka := e.st.KeepAlive(ctx, l)
			for range 2 {
				is.NoErr(e.clk.WaitTimers(wctx, 2))                                    // the keep-alive waits for its renewal and its expiry
				e.clk.Advance(10 * time.Second)                                        // a third of the TTL: time to renew
				is.NoErr(e.clk.WaitTimers(wctx, 2))                                    // it renewed and waits again
				is.True(ka.Lease().ExpiresAt.Equal(e.clk.Now().Add(30 * time.Second))) // KeepAlive renews the lease in the background
			}
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: "r", Limit: 10})
			is.NoErr(err)
			is.Equal(evs[0].Op, "lease.renew") // each renewal is recorded
			is.Equal(ka.Err(), nil)            // a running keep-alive has no error
			ok, err := e.st.ReleaseLease(ctx, "r", "A")
			is.NoErr(err)
			is.True(ok)
			_, err = e.st.TryAcquireLease(ctx, "r", "B", time.Hour)
			is.NoErr(err)
			e.clk.Advance(10 * time.Second)
			select {
			case <-ka.Done():
			case <-wctx.Done():
				t.Fatal("KeepAlive must stop when the lease is lost")
			}
			is.True(errors.Is(ka.Err(), state.ErrNotHeld)) // a lost lease is reported as ErrNotHeld
			ka.Stop()

			l2, err := e.st.TryAcquireLease(ctx, "s", "A", time.Minute)
			is.NoErr(err)
			ka2 := e.st.KeepAlive(ctx, l2)
			is.NoErr(e.clk.WaitTimers(wctx, 2))
			e.clk.Advance(time.Hour) // the process slept past the expiry: no renewal was in time
			select {
			case <-ka2.Done():
			case <-wctx.Done():
				t.Fatal("KeepAlive must stop at the lease's expiry")
			}
			var le *state.LeaseExpiredError
			is.True(errors.As(ka2.Err(), &le) && errors.Is(ka2.Err(), state.ErrNotHeld)) // an expired lease is reported as such

			l3, err := e.st.TryAcquireLease(ctx, "u", "A", time.Minute)
			is.NoErr(err)
			ka3 := e.st.KeepAlive(ctx, l3)
			ka3.Stop()
			is.True(errors.Is(ka3.Err(), context.Canceled)) // Stop ends the keep-alive with context.Canceled
		}},
	}
}
