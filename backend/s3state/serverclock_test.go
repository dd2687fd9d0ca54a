package s3state_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/s3test"
)

// skewed answers with a Date header of a clock offset ahead.
func skewed(offset time.Duration) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", time.Now().Add(offset).UTC().Format(http.TimeFormat))
			h.ServeHTTP(w, r)
		})
	}
}

// TestExpiryFollowsTheServersClock runs two stores, with no clock of their
// own, against a server whose clock is 2h46m40.5s ahead of this machine's:
// both read the server's clock (to within what they can tell), and a
// lease one takes expires by it, as the other sees it.
func TestExpiryFollowsTheServersClock(t *testing.T) {
	const offset = 2*time.Hour + 46*time.Minute + 40500*time.Millisecond
	f := s3test.NewFake(t, skewed(offset))
	ctx := context.Background()
	open := func() (*state.Store, interface{ Uncertainty() time.Duration }) {
		d, err := s3state.Open(ctx, f.Options("clock"))
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.New(d, &state.Options{SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st, d.Medium().(interface{ Uncertainty() time.Duration })
	}
	a, ua := open()
	b, ub := open()
	// The clocks calibrate in the background, to within about a round trip:
	// below the Date header's one second, but how far below depends on the
	// machine's load (a busy two-core machine sees round trips of 100 ms
	// and more), so the check is that the server time is as close as the
	// store says it is.
	for _, u := range []interface{ Uncertainty() time.Duration }{ua, ub} {
		deadline := time.Now().Add(time.Minute)
		for u.Uncertainty() > 500*time.Millisecond {
			if time.Now().After(deadline) {
				t.Fatalf("the clock is still uncertain by %v after a minute", u.Uncertainty())
			}
			time.Sleep(20 * time.Millisecond) // polls a condition; the deadline alone bounds the test
		}
	}
	for i, st := range []*state.Store{a, b} {
		unc := []interface{ Uncertainty() time.Duration }{ua, ub}[i].Uncertainty()
		now, err := st.Driver().(interface {
			ServerTime(context.Context) (time.Time, error)
		}).ServerTime(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d, most := now.Sub(time.Now().Add(offset)), unc+150*time.Millisecond; d < -most || d > most {
			t.Errorf("the store's server time is %v off the server's clock, beyond its uncertainty %v", d, unc)
		}
	}
	l, err := a.TryAcquireLease(ctx, "res", "holder-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if d := l.ExpiresAt.Sub(time.Now().Add(offset + time.Minute)); d < -time.Second || d > time.Second {
		t.Errorf("the lease expires %v off a minute from now by the server's clock", d)
	}
	got, err := b.GetLease(ctx, "res")
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "holder-a" || !got.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("the other store sees %+v, want the lease of holder-a until %v", got, l.ExpiresAt)
	}
}
