package state_test

import (
	"context"
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
)

// A run with more step outputs than one commit of DeleteRun removes is
// deleted in several commits, and nothing of it is left.
func TestDeleteRunOfARunWithManyOutputsLeavesNothing(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	drv := memstate.New()
	st, err := state.New(drv, &state.Options{SweepInterval: -1})
	is.NoErr(err)
	defer st.Close()
	r, err := st.CreateRun(ctx, "big", nil)
	is.NoErr(err)
	c, err := st.ClaimRun(ctx, r.ID, "A")
	is.NoErr(err)
	const steps = 1234
	for i := int64(1); i <= steps; i++ {
		_, err := st.CheckpointRun(ctx, r.ID, i, i, state.WithFence(c.Fence))
		is.NoErr(err)
	}
	_, err = st.CompleteRun(ctx, r.ID)
	is.NoErr(err)
	res, err := st.ResumeRun(ctx, r.ID)
	is.NoErr(err)
	is.Equal(len(res.Outputs), steps)

	ok, err := st.DeleteRun(ctx, r.ID)
	is.NoErr(err)
	is.True(ok)
	_, err = st.ResumeRun(ctx, r.ID)
	is.True(errors.Is(err, state.ErrNotFound))
	recs, err := drv.List(ctx, &backend.ListQuery{NS: st.NamespaceName(), Prefix: "", Limit: 100})
	is.NoErr(err)
	for _, rec := range recs {
		// Only counters may stay (at zero): no run, output or index entry.
		if rec.Key[:2] != "n/" {
			t.Errorf("left behind: %s", rec.Key)
		}
	}
}
