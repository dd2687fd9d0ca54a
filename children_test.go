package state_test

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/statetest"
)

// A store remembers the parents of the children it saw, so that finishing
// one reads its parent at once; a memory made stale by a reset (the run's
// id now names a run with another parent, or none) must not mislead it.
func TestFinishingAChildWhoseRememberedParentIsStale(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	st, err := state.New(memstate.New(), &state.Options{Clock: statetest.NewClock(), SweepInterval: -1})
	is.NoErr(err)
	defer st.Close()

	p, err := st.CreateRun(ctx, "aggregate", nil, state.WithJoin())
	is.NoErr(err)
	c, err := st.CreateRun(ctx, "child", nil, state.WithParent(p.ID))
	is.NoErr(err)
	_, err = st.Reset(ctx)
	is.NoErr(err)

	// The child's id comes back without a parent.
	_, _, err = st.ImportRun(ctx, state.ImportedRun{ID: c.ID, Name: "plain", Status: state.StatusCreated})
	is.NoErr(err)
	_, err = st.CompleteRun(ctx, c.ID)
	is.NoErr(err)

	got, err := st.GetRun(ctx, c.ID)
	is.NoErr(err)
	is.Equal(got.Status, state.StatusDone)

	// A child the store remembers releases its join parent.
	q, err := st.CreateRun(ctx, "aggregate-2", nil, state.WithJoin())
	is.NoErr(err)
	k, err := st.CreateRun(ctx, "child", nil, state.WithParent(q.ID))
	is.NoErr(err)
	_, err = st.FailRun(ctx, k.ID)
	is.NoErr(err)
	got, err = st.GetRun(ctx, q.ID)
	is.NoErr(err)
	is.Equal(got.Status, state.StatusCreated) // released by its only child
	is.Equal(got.Children[state.StatusFailed], int64(1))
}
