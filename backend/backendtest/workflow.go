package backendtest

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

var runIDPattern = regexp.MustCompile(`^wf-[0-9a-f]{12}$`)

func mustCreate(t *testing.T, e storeEnv, name string, tags map[string]string) state.Run {
	t.Helper()
	r, err := e.st.CreateRun(ctx, name, tags)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	return r
}

func mustClaim(t *testing.T, e storeEnv, id, agent string, opts ...state.ClaimOption) state.Claim {
	t.Helper()
	c, err := e.st.ClaimRun(ctx, id, agent, opts...)
	if err != nil {
		t.Fatalf("ClaimRun(%s, %s): %v", id, agent, err)
	}
	return c
}

func runIDs(runs []state.Run) []string {
	ids := []string{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func workflowCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"CreateRunStartsCreated", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "pr-review", map[string]string{"repo": "org/app"})
			is.True(runIDPattern.MatchString(r.ID)) // a run id is wf- and 12 lowercase hex digits
			is.Equal(r.Status, state.StatusCreated) // a new run is created
			is.Equal(r.Attempt, int64(0))           // a new run has attempt 0
			is.Equal(r.Tags["repo"], "org/app")
			is.True(r.CreatedAt.Equal(t0) && r.UpdatedAt.Equal(t0))
			is.True(r.Claimable) // a created run is claimable
			got, err := e.st.GetRun(ctx, r.ID)
			is.NoErr(err)
			is.Equal(got.Name, "pr-review")
			r2 := mustCreate(t, e, "pr-review", nil)
			is.True(r2.ID != r.ID) // names may repeat; ids do not
			is.Equal(r2.Tags, map[string]string{})
		}},
		{"ClaimHasExactlyTheDocumentedOutcomes", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Minute))
			is.Equal(c.Run.Status, state.StatusClaimed)     // created → claimed
			is.Equal(c.Attempt, int64(1))                   // the first claim is attempt 1
			is.True(c.Fence > 0)                            // a claim carries a fence token
			is.True(c.ExpiresAt.Equal(t0.Add(time.Minute))) // the claim expires after its TTL
			is.True(!c.Run.Claimable)
			e.clk.Advance(30 * time.Second)
			hb := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Minute))
			is.True(hb.Renewed)                                   // the holder claiming again is a heartbeat
			is.Equal(hb.Fence, c.Fence)                           // a heartbeat keeps the fence
			is.True(hb.ExpiresAt.Equal(t0.Add(90 * time.Second))) // a heartbeat extends the claim
			_, err := e.st.ClaimRun(ctx, r.ID, "B")
			var ce *state.ClaimError
			is.True(errors.As(err, &ce) && errors.Is(err, state.ErrClaimed))   // another agent cannot claim a live claim
			is.Equal(ce.Error(), "Workflow is in status 'claimed' (agent: A)") // the reason names status and holder
			_, err = e.st.CheckpointRun(ctx, r.ID, 1, map[string]int{"files": 12}, state.WithAgent("A"))
			is.NoErr(err)
			_, err = e.st.ClaimRun(ctx, r.ID, "B")
			is.True(errors.As(err, &ce) && ce.Status == state.StatusRunning) // the reason gives the current status
			e.clk.Advance(time.Minute)
			got, _ := e.st.GetRun(ctx, r.ID)
			is.True(got.Claimable) // a running run whose claim expired is claimable
			tk := mustClaim(t, e, r.ID, "B")
			is.True(tk.Reclaimed)                                               // taking over an expired claim is a reclaim
			is.Equal(tk.Attempt, int64(2))                                      // a takeover increments the attempt
			is.True(tk.Fence > c.Fence)                                         // a takeover gets a strictly greater fence
			is.Equal(tk.Run.LastStep, int64(1))                                 // a takeover keeps the last step
			is.True(tk.ExpiresAt.Equal(e.clk.Now().Add(state.DefaultClaimTTL))) // the claim TTL defaults to 10 minutes
			res, err := e.st.ResumeRun(ctx, r.ID)
			is.NoErr(err)
			is.Equal(len(res.Outputs), 1) // a takeover keeps the outputs
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithAgent("B"))
			is.NoErr(err)
			_, err = e.st.ClaimRun(ctx, r.ID, "C")
			is.True(errors.Is(err, state.ErrFinished)) // a finished run cannot be claimed
			_, err = e.st.ClaimRun(ctx, "wf-000000000000", "C")
			is.True(errors.Is(err, state.ErrNotFound)) // an unknown run is not found
		}},
		{"CheckpointStoresStepsAndIsAHeartbeat", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Minute))
			e.clk.Advance(50 * time.Second)
			run, err := e.st.CheckpointRun(ctx, r.ID, 1, json.RawMessage(`{"files":12}`), state.WithAgent("A"), state.WithFence(c.Fence))
			is.NoErr(err)
			is.Equal(run.Status, state.StatusRunning)                    // a checkpoint moves claimed to running
			is.Equal(run.LastStep, int64(1))                             // a checkpoint raises the last step
			is.True(run.ClaimExpiresAt.Equal(t0.Add(110 * time.Second))) // every checkpoint extends the claim
			_, err = e.st.CheckpointRun(ctx, r.ID, 3, "three")
			is.NoErr(err) // a checkpoint without agent or fence is not owner-checked
			run, err = e.st.CheckpointRun(ctx, r.ID, 2, "two")
			is.NoErr(err)
			is.Equal(run.LastStep, int64(3)) // the last step never goes down
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "two again")
			is.NoErr(err)
			res, err := e.st.ResumeRun(ctx, r.ID)
			is.NoErr(err)
			is.Equal(res.LastStep, int64(3))
			is.Equal(len(res.Outputs), 3)
			is.Equal([]int64{res.Outputs[0].Step, res.Outputs[1].Step, res.Outputs[2].Step}, []int64{1, 2, 3}) // outputs come by ascending step
			is.Equal(string(res.Outputs[1].Output), `"two again"`)                                             // replaying a step overwrites its output
			is.Equal(string(res.Outputs[0].Output), `{"files":12}`)
			_, err = e.st.CheckpointRun(ctx, "wf-000000000000", 1, "x")
			is.True(errors.Is(err, state.ErrNotFound)) // checkpointing an unknown run is an error
			created := mustCreate(t, e, "other", nil)
			run, err = e.st.CheckpointRun(ctx, created.ID, 0, nil)
			is.NoErr(err)
			is.Equal(run.Status, state.StatusRunning) // a checkpoint moves created to running
		}},
		{"StaleWorkerCannotOverwriteItsSuccessor", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			a := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Minute))
			_, err := e.st.CheckpointRun(ctx, r.ID, 1, "A1", state.WithAgent("A"), state.WithFence(a.Fence))
			is.NoErr(err)
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "B?", state.WithAgent("B"))
			is.True(errors.Is(err, state.ErrNotHeld)) // an agent without the claim cannot checkpoint with WithAgent
			e.clk.Advance(time.Minute)
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "A2 late", state.WithAgent("A"))
			is.True(errors.Is(err, state.ErrNotHeld)) // a holder whose claim expired cannot checkpoint with WithAgent
			b := mustClaim(t, e, r.ID, "B")
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "A2 stale", state.WithFence(a.Fence))
			var nh *state.NotHeldError
			is.True(errors.As(err, &nh)) // a stale fence is rejected
			is.Equal(nh.Holder, "B")     // the rejection names the current holder
			is.Equal(nh.Fence, b.Fence)  // and its fence
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "A2 stale", state.WithAgent("A"), state.WithFence(a.Fence))
			is.True(errors.Is(err, state.ErrNotHeld))
			_, err = e.st.CheckpointRun(ctx, r.ID, 2, "B2", state.WithAgent("B"), state.WithFence(b.Fence))
			is.NoErr(err) // the successor can checkpoint
			res, _ := e.st.ResumeRun(ctx, r.ID)
			is.Equal(string(res.Outputs[1].Output), `"B2"`) // the stale worker's writes changed nothing
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithFence(a.Fence))
			is.True(errors.Is(err, state.ErrNotHeld)) // a stale fence cannot finish the run
		}},
		{"CheckpointCanFinishTheRun", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r.ID, "A")
			run, err := e.st.CheckpointRun(ctx, r.ID, 4, "LGTM", state.WithAgent("A"), state.WithFence(c.Fence), state.WithStatus(state.StatusDone))
			is.NoErr(err)
			is.Equal(run.Status, state.StatusDone) // a checkpoint with status done finishes the run
			is.True(run.ClaimExpiresAt.IsZero())   // a finished run has no claim
			is.True(!run.Claimable)
			_, err = e.st.CheckpointRun(ctx, r.ID, 4, "LGTM", state.WithAgent("A"), state.WithStatus(state.StatusDone))
			is.NoErr(err) // replaying the finishing checkpoint succeeds
			_, err = e.st.CheckpointRun(ctx, r.ID, 5, "more")
			is.True(errors.Is(err, state.ErrFinished)) // a finished run accepts no more checkpoints
			res, _ := e.st.ResumeRun(ctx, r.ID)
			is.Equal(len(res.Outputs), 1)
			_, err = e.st.CheckpointRun(ctx, r.ID, 1, "x", state.WithStatus(state.StatusRunning))
			is.True(errors.Is(err, state.ErrInvalid)) // only done or failed can finish a run
			f := mustCreate(t, e, "job2", nil)
			run, err = e.st.CheckpointRun(ctx, f.ID, 1, map[string]string{"error": "boom"}, state.WithStatus(state.StatusFailed))
			is.NoErr(err)
			is.Equal(run.Status, state.StatusFailed) // a checkpoint with status failed fails the run
		}},
		{"CompleteFailAndRelease", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			mustClaim(t, e, r.ID, "A")
			_, err := e.st.ReleaseRun(ctx, r.ID, "B")
			is.True(errors.Is(err, state.ErrNotHeld)) // only the holder can release a claim
			run, err := e.st.ReleaseRun(ctx, r.ID, "A")
			is.NoErr(err)
			is.Equal(run.Status, state.StatusCreated) // releasing a claimed run makes it created again
			is.Equal(run.AgentID, "")                 // a released run has no agent
			is.True(run.Claimable)                    // a released run is claimable at once
			c := mustClaim(t, e, r.ID, "B")
			is.Equal(c.Attempt, int64(2)) // claiming after a release is a new attempt
			_, err = e.st.CompleteRun(ctx, r.ID, state.WithAgent("A"))
			is.True(errors.Is(err, state.ErrNotHeld)) // only the holder can complete with WithAgent
			run, err = e.st.CompleteRun(ctx, r.ID, state.WithAgent("B"), state.WithFence(c.Fence))
			is.NoErr(err)
			is.Equal(run.Status, state.StatusDone)
			_, err = e.st.CompleteRun(ctx, r.ID)
			is.NoErr(err) // completing a done run again is a no-op
			_, err = e.st.FailRun(ctx, r.ID)
			is.True(errors.Is(err, state.ErrFinished)) // a done run cannot fail
			f := mustCreate(t, e, "job", nil)
			run, err = e.st.FailRun(ctx, f.ID)
			is.NoErr(err)
			is.Equal(run.Status, state.StatusFailed)
		}},
		{"DiscoverFiltersByTagsStatusAndClaimability", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			mk := func(tags map[string]string) state.Run {
				e.clk.Advance(time.Millisecond)
				return mustCreate(t, e, "job", tags)
			}
			a := mk(map[string]string{"pipeline": "pr", "repo": "x"})
			b := mk(map[string]string{"pipeline": "pr", "repo": "y"})
			c := mk(map[string]string{"pipeline": "other"})
			d := mk(map[string]string{"pipeline": "pr", "repo": "x"})
			mustClaim(t, e, b.ID, "W", state.WithClaimTTL(time.Second))
			mustClaim(t, e, d.ID, "W", state.WithClaimTTL(time.Hour))
			p, err := e.st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"pipeline": "pr"}})
			is.NoErr(err)
			is.Equal(runIDs(p.Runs), []string{d.ID, b.ID, a.ID}) // tags select, newest first
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"pipeline": "pr", "repo": "x"}})
			is.Equal(runIDs(p.Runs), []string{d.ID, a.ID}) // several tags are ANDed
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Status: state.StatusCreated})
			is.Equal(runIDs(p.Runs), []string{c.ID, a.ID}) // status selects
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Status: state.StatusClaimed, Tags: map[string]string{"repo": "x"}})
			is.Equal(runIDs(p.Runs), []string{d.ID}) // status and tags combine
			e.clk.Advance(time.Second)
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Claimable: true})
			is.Equal(runIDs(p.Runs), []string{c.ID, b.ID, a.ID}) // claimable: created, or claimed with an expired claim
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Claimable: true, Tags: map[string]string{"pipeline": "pr"}, Status: state.StatusClaimed})
			is.Equal(runIDs(p.Runs), []string{b.ID})
			p, _ = e.st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"pipeline": "none"}})
			is.Equal(len(p.Runs), 0) // no match gives an empty page
			var all []string
			cursor := ""
			for {
				p, err := e.st.ListRuns(ctx, state.WithLimit(3), state.WithCursor(cursor))
				is.NoErr(err)
				all = append(all, runIDs(p.Runs)...)
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			is.Equal(all, []string{d.ID, c.ID, b.ID, a.ID}) // ListRuns pages through every run, newest first
			var claimable []string
			cursor = ""
			for {
				p, err := e.st.DiscoverRuns(ctx, state.RunQuery{Claimable: true, Limit: 1, Cursor: cursor})
				is.NoErr(err)
				claimable = append(claimable, runIDs(p.Runs)...)
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			is.Equal(claimable, []string{c.ID, b.ID, a.ID}) // discovery pages merge statuses in order
		}},
		{"ResumeOfUnknownRunIsNotFound", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.ResumeRun(ctx, "wf-abcdefabcdef")
			is.True(errors.Is(err, state.ErrNotFound)) // resume of an unknown run is not found
			_, err = e.st.GetRun(ctx, "wf-abcdefabcdef")
			is.True(errors.Is(err, state.ErrNotFound)) // status of an unknown run is not found
		}},
	}
}
