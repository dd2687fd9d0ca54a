package redisstate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/redistest"
)

// TestZeroNowMeansRedisClock checks that a call without a time is judged by
// Redis's clock, read inside the script, not by the caller's.
func TestZeroNowMeansRedisClock(t *testing.T) {
	is := is.New(t)
	d := newDriver(t, sharedClient(t))
	before, err := d.ServerTime(ctx)
	is.NoErr(err)
	res, err := d.Commit(ctx, &backend.Txn{NS: "clock", Then: []backend.Op{{Kind: backend.OpPut, Key: "k", TTL: time.Hour}}})
	is.NoErr(err)
	after, err := d.ServerTime(ctx)
	is.NoErr(err)
	is.True(!res.Now.Before(before.Truncate(time.Millisecond)) && !res.Now.After(after)) // a zero Txn.Now is Redis's TIME during the commit
	r, err := d.Get(ctx, "clock", "k", time.Time{})
	is.NoErr(err)                                             // live by Redis's clock
	is.True(r.ExpiresAt.Equal(res.Now.Add(time.Hour)))        // expiry is Redis's now + TTL
	_, err = d.Get(ctx, "clock", "k", after.Add(2*time.Hour)) // the same record judged at a given, later time
	is.True(errors.Is(err, backend.ErrNotFound))
}

// TestReplicasWithoutClockAgreeOnExpiry runs two stores without injected
// clocks, as in production: a lease taken through one with a short TTL is
// held for the other until Redis's clock passes its expiry, then free.
func TestReplicasWithoutClockAgreeOnExpiry(t *testing.T) {
	is := is.New(t)
	rdb := sharedClient(t)
	d := newDriver(t, rdb)
	a, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := state.New(newDriverWithPrefix(t, rdb, d.Prefix()), &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	l, err := a.TryAcquireLease(ctx, "r", "A", 300*time.Millisecond)
	is.NoErr(err)
	_, err = b.TryAcquireLease(ctx, "r", "B", time.Minute)
	var he *state.HeldError
	is.True(errors.As(err, &he)) // the other replica sees the lease held
	is.Equal(he.Holder, "A")
	is.True(he.ExpiresAt.Equal(l.ExpiresAt)) // with the expiry Redis computed
	deadline := time.Now().Add(redistest.Wait)
	for {
		l2, err := b.TryAcquireLease(ctx, "r", "B", time.Minute)
		if err == nil {
			is.True(l2.Takeover) // once Redis's clock passes the expiry, the other replica takes over
			is.True(l2.Fence > l.Fence)
			break
		}
		is.True(errors.As(err, &he))
		is.True(time.Now().Before(deadline)) // the lease must expire by Redis's clock
		time.Sleep(20 * time.Millisecond)    // waiting for Redis's clock to pass the expiry
	}
}
