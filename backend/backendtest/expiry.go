package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

// odd is a TTL that is not a whole number of milliseconds; every backend
// must treat it as the next whole millisecond, 1502ms.
const (
	odd     = 1501*time.Millisecond + 300*time.Microsecond
	oddUpTo = 1502 * time.Millisecond
)

func expiryCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"ExpiryReportedIsExpiryStored", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			now := e.clk.Now()
			want := now.Add(oddUpTo)

			set, err := e.st.Set(ctx, "k", 1, state.WithTTL(odd))
			is.NoErr(err)
			is.True(set.ExpiresAt.Equal(want)) // Set reports the TTL rounded up to a whole millisecond
			got, err := e.st.Get(ctx, "k")
			is.NoErr(err)
			is.True(got.ExpiresAt.Equal(set.ExpiresAt)) // Get reads back exactly the expiry Set reported

			many, err := e.st.SetMany(ctx, []state.Item{{Key: "m", Value: 1}}, state.WithTTL(odd))
			is.NoErr(err)
			got, err = e.st.Get(ctx, "m")
			is.NoErr(err)
			is.True(many[0].ExpiresAt.Equal(want) && got.ExpiresAt.Equal(want)) // SetMany too

			up, err := e.st.Update(ctx, []string{"u"}, func([]state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "u", Value: 1, TTL: odd}}, nil
			})
			is.NoErr(err)
			got, err = e.st.Get(ctx, "u")
			is.NoErr(err)
			is.True(up[0].ExpiresAt.Equal(want) && got.ExpiresAt.Equal(want)) // Update too

			ss, err := e.st.SetSession(ctx, "s", map[string]int{}, state.WithTTL(odd))
			is.NoErr(err)
			rs, err := e.st.GetSession(ctx, "s")
			is.NoErr(err)
			is.True(ss.ExpiresAt.Equal(want) && rs.ExpiresAt.Equal(want)) // sessions too

			l, err := e.st.TryAcquireLease(ctx, "l", "A", odd)
			is.NoErr(err)
			is.True(l.ExpiresAt.Equal(want)) // leases too
			is.Equal(l.TTL, oddUpTo)         // and the lease's TTL is the rounded one
			gl, err := e.st.GetLease(ctx, "l")
			is.NoErr(err)
			is.True(gl.ExpiresAt.Equal(want))
			is.Equal(gl.TTL, oddUpTo)

			r := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(odd))
			is.True(c.ExpiresAt.Equal(want)) // claims too
			run, err := e.st.GetRun(ctx, r.ID)
			is.NoErr(err)
			is.True(run.ClaimExpiresAt.Equal(want))

			e.clk.Advance(oddUpTo - time.Millisecond)
			rn, err := e.st.RenewLease(ctx, "l", "A", odd)
			is.NoErr(err) // everything is live a millisecond before the rounded expiry
			is.True(rn.ExpiresAt.Equal(e.clk.Now().Add(oddUpTo)))
			for _, k := range []string{"k", "m"} {
				ok, err := e.st.Exists(ctx, k)
				is.NoErr(err)
				is.True(ok)
			}
			_, err = e.st.GetSession(ctx, "s")
			is.NoErr(err)
			e.clk.Advance(time.Millisecond)
			for _, k := range []string{"k", "m"} {
				_, err := e.st.Get(ctx, k)
				is.True(errors.Is(err, state.ErrNotFound)) // and gone exactly at it
			}
			_, err = e.st.GetSession(ctx, "s")
			is.True(errors.Is(err, state.ErrNotFound))
			run, err = e.st.GetRun(ctx, r.ID)
			is.NoErr(err)
			is.True(run.Claimable) // the claim expired at the expiry it reported
		}},
	}
}
