package state_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/storetest"
)

// TestListLeasesSessionsAndOutputsPageOnEveryBackend lists leases, sessions
// and a run's outputs in pages on every backend: every live record once, in
// order, and nothing of another kind, another namespace or an expired one.
func TestListLeasesSessionsAndOutputsPageOnEveryBackend(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := context.Background()
		st := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1})
		other, err := st.Namespace("other")
		is.NoErr(err)
		for i := range 5 {
			_, err := st.TryAcquireLease(ctx, fmt.Sprintf("res/%d", i), fmt.Sprintf("h%d", i), time.Minute)
			is.NoErr(err)
			_, err = st.SetSession(ctx, fmt.Sprintf("sess-%d", i), map[string]int{"n": i}, state.WithAgent("a"))
			is.NoErr(err)
		}
		_, err = st.TryAcquireLease(ctx, "zzz", "h", time.Minute)
		is.NoErr(err)
		_, err = other.TryAcquireLease(ctx, "res/other", "h", time.Minute)
		is.NoErr(err)
		_, err = st.Set(ctx, "res/not-a-lease", 1)
		is.NoErr(err)

		var got []string
		cursor := ""
		for {
			p, err := st.ListLeases(ctx, "res/", state.WithLimit(2), state.WithCursor(cursor))
			is.NoErr(err)
			for _, l := range p.Leases {
				is.True(l.Fence > 0)
				is.True(l.TTL == time.Minute)
				is.True(!l.ExpiresAt.IsZero())
				got = append(got, l.Resource+"="+l.Holder)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		is.Equal(fmt.Sprint(got), "[res/0=h0 res/1=h1 res/2=h2 res/3=h3 res/4=h4]")

		sp, err := st.ListSessions(ctx, "", state.WithLimit(3))
		is.NoErr(err)
		is.Equal(len(sp.Sessions), 3)
		is.Equal(sp.Sessions[0].ID, "sess-0")
		is.Equal(string(sp.Sessions[0].Context), `{"n":0}`)
		is.Equal(sp.Sessions[0].AgentID, "a")
		sp, err = st.ListSessions(ctx, "", state.WithCursor(sp.NextCursor))
		is.NoErr(err)
		is.Equal(len(sp.Sessions), 2)
		is.Equal(sp.NextCursor, "")

		_, err = st.ListSessions(ctx, "x", state.WithCursor(sp.Sessions[0].ID))
		is.True(errors.Is(err, state.ErrInvalid)) // not a cursor of this listing

		run, err := st.CreateRun(ctx, "r", nil)
		is.NoErr(err)
		for step := int64(1); step <= 3; step++ {
			_, err := st.CheckpointRun(ctx, run.ID, step, map[string]int64{"step": step})
			is.NoErr(err)
		}
		op, err := st.ListOutputs(ctx, run.ID, state.WithLimit(2))
		is.NoErr(err)
		is.Equal(len(op.Outputs), 2)
		is.Equal(op.Outputs[1].Step, int64(2))
		op, err = st.ListOutputs(ctx, run.ID, state.WithCursor(op.NextCursor))
		is.NoErr(err)
		is.Equal(len(op.Outputs), 1)
		is.Equal(string(op.Outputs[0].Output), `{"step":3}`)

		op, err = st.ListOutputs(ctx, "wf-000000000000")
		is.NoErr(err)
		is.Equal(len(op.Outputs), 0)
		_, err = st.ListOutputs(ctx, "")
		is.True(errors.Is(err, state.ErrInvalid))
	})
}
