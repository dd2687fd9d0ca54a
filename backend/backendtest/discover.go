package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// hookedDriver calls hook after every List, so that a test can change the
// store between the index pages one discovery reads.
type hookedDriver struct {
	backend.Driver
	hook func()
}

func (h hookedDriver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	recs, err := h.Driver.List(ctx, q)
	h.hook()
	return recs, err
}

// Close leaves the shared driver to the store that owns it.
func (h hookedDriver) Close() error { return nil }

func discoverCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"ClaimableDiscoveryNeverSkipsARunClaimableThroughout", func(t *testing.T, e storeEnv) {
			for _, tags := range []map[string]string{nil, {"queue": "q"}} {
				t.Run(fmt.Sprintf("tags=%v", tags), func(t *testing.T) {
					testNoSkip(t, e, tags)
				})
			}
		}},
		{"FinishByALostHolderIsNeverASuccess", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			// A's claim expires, B takes over and completes the run.
			r := mustCreate(t, e, "job", nil)
			a := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Second))
			e.clk.Advance(time.Second)
			b := mustClaim(t, e, r.ID, "B")
			_, err := e.st.CompleteRun(ctx, r.ID, state.WithFence(b.Fence))
			is.NoErr(err)
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithFence(a.Fence))
			is.True(errors.Is(err, state.ErrNotHeld)) // a stale fence is not told that completing a done run succeeded
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithAgent("A"))
			is.True(errors.Is(err, state.ErrNotHeld)) // nor is a stale agent
			_, err = e.st.FailRun(ctx, r.ID, state.WithFence(a.Fence))
			is.True(errors.Is(err, state.ErrNotHeld)) // the holder is checked before the status
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithAgent("B"), state.WithFence(b.Fence))
			is.NoErr(err) // the holder that completed the run may retry
			_, err = e.st.CompleteRun(ctx, r.ID)
			is.NoErr(err) // an unchecked retry succeeds as before

			// The same through a checkpoint that finishes the run.
			r2 := mustCreate(t, e, "job", nil)
			a = mustClaim(t, e, r2.ID, "A", state.WithClaimTTL(time.Second))
			e.clk.Advance(time.Second)
			b = mustClaim(t, e, r2.ID, "B")
			_, err = e.st.CheckpointRun(ctx, r2.ID, 2, "final", state.WithFence(b.Fence), state.WithStatus(state.StatusDone))
			is.NoErr(err)
			_, err = e.st.CheckpointRun(ctx, r2.ID, 2, "final", state.WithFence(a.Fence), state.WithStatus(state.StatusDone))
			is.True(errors.Is(err, state.ErrNotHeld)) // a stale fence replaying the finishing checkpoint is not told it succeeded
			_, err = e.st.CheckpointRun(ctx, r2.ID, 2, "final", state.WithAgent("A"), state.WithStatus(state.StatusDone))
			is.True(errors.Is(err, state.ErrNotHeld))
			_, err = e.st.CheckpointRun(ctx, r2.ID, 2, "final", state.WithFence(b.Fence), state.WithStatus(state.StatusDone))
			is.NoErr(err) // the holder that finished the run may replay its checkpoint

			// A holder that released its claim lost it too.
			r3 := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r3.ID, "C")
			_, err = e.st.ReleaseRun(ctx, r3.ID, "C")
			is.NoErr(err)
			_, err = e.st.CompleteRun(ctx, r3.ID)
			is.NoErr(err)
			_, err = e.st.CompleteRun(ctx, r3.ID, state.WithFence(c.Fence))
			is.True(errors.Is(err, state.ErrNotHeld)) // a released claim's fence is not told it succeeded
			r4 := mustCreate(t, e, "job", nil)
			_, err = e.st.FailRun(ctx, r4.ID)
			is.NoErr(err)
			_, err = e.st.FailRun(ctx, r4.ID, state.WithAgent("X"))
			is.True(errors.Is(err, state.ErrNotHeld)) // a run nobody claimed has no holder to match
		}},
		{"DiscoveryByTagsChoosesTheSmallestIndex", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			var want []string
			for i := range 300 {
				tags := map[string]string{"big": "1"}
				if i%100 == 0 {
					tags["small"] = "1"
				}
				e.clk.Advance(time.Millisecond)
				r := mustCreate(t, e, "job", tags)
				if i%100 == 0 {
					want = append([]string{r.ID}, want...)
				}
				if i%100 == 0 && i > 0 {
					_, err := e.st.CompleteRun(ctx, r.ID)
					is.NoErr(err)
				}
			}
			both := map[string]string{"big": "1", "small": "1"}
			p, err := e.st.DiscoverRuns(ctx, state.RunQuery{Tags: both})
			is.NoErr(err)
			is.Equal(runIDs(p.Runs), want) // several tags select the runs having all of them, newest first
			p, err = e.st.DiscoverRuns(ctx, state.RunQuery{Tags: both, Claimable: true})
			is.NoErr(err)
			is.Equal(runIDs(p.Runs), want[len(want)-1:]) // finished runs leave the index of open runs
			p, err = e.st.DiscoverRuns(ctx, state.RunQuery{Tags: both, Status: state.StatusDone, Limit: 1})
			is.NoErr(err)
			is.Equal(runIDs(p.Runs), want[:1]) // status and tags combine, and pages
			p, err = e.st.DiscoverRuns(ctx, state.RunQuery{Tags: both, Status: state.StatusDone, Cursor: p.NextCursor})
			is.NoErr(err)
			is.Equal(runIDs(p.Runs), want[1:2])
		}},
	}
}

// testNoSkip pages through claimable runs while, after every index read, a
// run whose claim expired moves from claimed to running. Half of the
// claimed runs hold live claims (not claimable), so a page reads the index
// more than once. Every other run is claimable during the whole listing,
// so every one must be listed, once, newest first.
func testNoSkip(t *testing.T, e storeEnv, tags map[string]string) {
	is := is.New(t)
	var ids []string // newest first
	for range 60 {
		e.clk.Advance(time.Millisecond)
		r := mustCreate(t, e, "job", tags)
		ids = append([]string{r.ID}, ids...)
	}
	want := slices.Clone(ids[:5]) // created
	for i, id := range ids[5:] {
		if i%2 == 0 {
			mustClaim(t, e, id, "busy", state.WithClaimTTL(time.Hour)) // stays held
		} else {
			mustClaim(t, e, id, "gone", state.WithClaimTTL(time.Second))
			want = append(want, id)
		}
	}
	e.clk.Advance(time.Second) // the claims of "gone" expired: its runs are claimable
	var moves []string         // claimable runs a little ahead of where a first page reads
	for i := 26; i < len(ids); i += 4 {
		moves = append(moves, ids[i])
	}
	planned := len(moves)
	move := func() {
		if len(moves) == 0 {
			return
		}
		id := moves[0]
		moves = moves[1:]
		run, err := e.st.CheckpointRun(ctx, id, 1, "still claimable")
		if err != nil || run.Status != state.StatusRunning || !run.Claimable {
			t.Errorf("moving %s from claimed to running: %v (status %s, claimable %v)", id, err, run.Status, run.Claimable)
		}
	}
	reader, err := state.New(hookedDriver{Driver: e.st.Driver(), hook: move},
		&state.Options{Clock: e.clk, SweepInterval: -1, Namespace: e.st.NamespaceName()})
	is.NoErr(err)
	defer reader.Close()
	var got []string
	cursor := ""
	for {
		p, err := reader.DiscoverRuns(ctx, state.RunQuery{Claimable: true, Tags: tags, Limit: 20, Cursor: cursor})
		is.NoErr(err)
		got = append(got, runIDs(p.Runs)...)
		move() // and between pages
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	is.True(planned-len(moves) >= 3) // runs moved while the listing ran
	if !slices.Equal(got, want) {
		t.Errorf("a run claimable during the whole listing was skipped or repeated:\ngot  %v\nwant %v", got, want)
	}
}
