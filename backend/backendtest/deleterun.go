package backendtest

import (
	"errors"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

// deleteRunCases check DeleteRun: a finished run leaves nothing behind (its
// record, outputs, index entries and counts), an open one or a parent with
// children is refused.
func deleteRunCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"DeleteRunRemovesAFinishedRunAndAllItHolds", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			keep := mustCreate(t, e, "job", map[string]string{"team": "a"})
			r := mustCreate(t, e, "job", map[string]string{"team": "a"})
			c := mustClaim(t, e, r.ID, "A")
			for step := int64(1); step <= 3; step++ {
				_, err := e.st.CheckpointRun(ctx, r.ID, step, map[string]int64{"n": step}, state.WithFence(c.Fence))
				is.NoErr(err)
			}
			_, err := e.st.DeleteRun(ctx, r.ID)
			is.True(errors.Is(err, state.ErrNotFinished)) // a running run is refused
			_, err = e.st.DeleteRun(ctx, keep.ID)
			is.True(errors.Is(err, state.ErrNotFinished)) // so is a created one
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithFence(c.Fence))
			is.NoErr(err)

			ok, err := e.st.DeleteRun(ctx, r.ID, state.WithAgent("janitor"))
			is.NoErr(err)
			is.True(ok) // the finished run was deleted
			_, err = e.st.GetRun(ctx, r.ID)
			is.True(errors.Is(err, state.ErrNotFound)) // it is gone
			_, err = e.st.ResumeRun(ctx, r.ID)
			is.True(errors.Is(err, state.ErrNotFound)) // with its outputs
			ok, err = e.st.DeleteRun(ctx, r.ID)
			is.NoErr(err)
			is.True(!ok) // deleting it again removes nothing

			for _, q := range []state.RunQuery{{}, {Tags: map[string]string{"team": "a"}}} {
				page, err := e.st.DiscoverRuns(ctx, q)
				is.NoErr(err)
				is.Equal(runIDs(page.Runs), []string{keep.ID}) // no index lists it any more
			}
			page, err := e.st.DiscoverRuns(ctx, state.RunQuery{Status: state.StatusDone})
			is.NoErr(err)
			is.Equal(len(page.Runs), 0) // not even the index of done runs
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(1))                           // the counters forgot it
			is.Equal(h.RunsByStatus[state.StatusDone], int64(0)) // no done run is counted
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: r.ID, Limit: 1})
			is.NoErr(err)
			is.Equal(len(evs), 1)
			is.Equal(evs[0].Op, "workflow.delete") // the deletion is in history
			is.Equal(evs[0].AgentID, "janitor")    // with who deleted it
			_, err = e.st.ClaimRun(ctx, r.ID, "B")
			is.True(errors.Is(err, state.ErrNotFound)) // a late worker finds no run to claim
		}},
		{"DeleteRunOfAParentWaitsForItsChildren", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			p := mustCreate(t, e, "parent", nil)
			kid, err := e.st.CreateRun(ctx, "child", nil, state.WithParent(p.ID))
			is.NoErr(err)
			_, err = e.st.FailRun(ctx, p.ID)
			is.NoErr(err)
			_, err = e.st.DeleteRun(ctx, p.ID)
			is.True(errors.Is(err, state.ErrHasChildren)) // a parent with children is refused
			_, err = e.st.FailRun(ctx, kid.ID)
			is.NoErr(err)
			ok, err := e.st.DeleteRun(ctx, kid.ID)
			is.NoErr(err)
			is.True(ok)
			got, err := e.st.GetRun(ctx, p.ID)
			is.NoErr(err)
			is.Equal(got.Children, map[state.Status]int64(nil)) // the parent no longer counts the child
			page, err := e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: p.ID})
			is.NoErr(err)
			is.Equal(len(page.Runs), 0) // nor lists it
			ok, err = e.st.DeleteRun(ctx, p.ID)
			is.NoErr(err)
			is.True(ok) // then the parent goes too
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(0))
		}},
	}
}
