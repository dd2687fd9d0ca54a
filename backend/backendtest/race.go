package backendtest

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

func raceCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"KeyValueOperationsAreLinearizable", linearizableCase},
		{"LeasesAreLinearizableAsTheyExpire", leaseModelCase},
		{"ClaimsAreLinearizableAsTheyExpire", claimModelCase},
		{"RacingClaimersHaveExactlyOneWinner", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			var wins, held atomic.Int64
			var winner atomic.Value
			var rc race
			rc.run(32, func(i int) {
				agent := fmt.Sprintf("agent-%d", i)
				call := rc.now()
				_, err := e.st.ClaimRun(ctx, r.ID, agent)
				rc.record(i, call)
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(agent)
				case errors.Is(err, state.ErrClaimed):
					held.Add(1)
				default:
					t.Errorf("claim: %v", err)
				}
			})
			checkOverlap(t, "claims", rc.spans)
			is.Equal(wins.Load(), int64(1))  // of 32 racing claimers exactly one wins
			is.Equal(held.Load(), int64(31)) // every other claimer is told the run is claimed
			got, _ := e.st.GetRun(ctx, r.ID)
			is.Equal(got.AgentID, winner.Load()) // the run names the winner
			is.Equal(got.Attempt, int64(1))      // and counts one attempt
		}},
		{"RacingTakeoversHaveExactlyOneWinner", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			first := mustClaim(t, e, r.ID, "crashed", state.WithClaimTTL(time.Second))
			e.clk.Advance(time.Second)
			var wins atomic.Int64
			var rc race
			rc.run(32, func(i int) {
				call := rc.now()
				c, err := e.st.ClaimRun(ctx, r.ID, fmt.Sprintf("agent-%d", i))
				rc.record(i, call)
				if err == nil {
					wins.Add(1)
					if c.Fence <= first.Fence {
						t.Errorf("takeover fence %d not above %d", c.Fence, first.Fence)
					}
				} else if !errors.Is(err, state.ErrClaimed) {
					t.Errorf("claim: %v", err)
				}
			})
			checkOverlap(t, "takeovers", rc.spans)
			is.Equal(wins.Load(), int64(1)) // of 32 agents racing to take over an expired claim exactly one wins
		}},
		{"RacingRunTransitionsKeepExactCounts", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			const n = 24
			runs := make([]state.Run, n)
			for i := range runs {
				runs[i] = mustCreate(t, e, "job", map[string]string{"batch": "1"})
			}
			var rc race
			rc.run(n, func(i int) {
				call := rc.now()
				defer rc.record(i, call)
				id, agent := runs[i].ID, fmt.Sprintf("agent-%d", i)
				if _, err := e.st.CreateRun(ctx, "more", nil); err != nil {
					t.Errorf("create: %v", err)
				}
				c, err := e.st.ClaimRun(ctx, id, agent)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				switch i % 4 {
				case 0:
					_, err = e.st.CompleteRun(ctx, id, state.WithFence(c.Fence))
				case 1:
					_, err = e.st.FailRun(ctx, id, state.WithAgent(agent))
				case 2:
					_, err = e.st.CheckpointRun(ctx, id, 1, "x", state.WithFence(c.Fence))
				case 3:
					_, err = e.st.ReleaseRun(ctx, id, agent)
				}
				if err != nil {
					t.Errorf("transition %d: %v", i%4, err)
				}
			})
			checkOverlap(t, "run transitions", rc.spans)
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			want := map[state.Status]int64{"waiting": 0, "created": n + n/4, "claimed": 0, "running": n / 4, "done": n / 4, "failed": n / 4}
			is.Equal(h.RunsByStatus, want) // status counts stay exact under racing transitions of different runs
			is.Equal(h.Runs, int64(2*n))
			p, err := e.st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"batch": "1"}, Claimable: true})
			is.NoErr(err)
			is.Equal(len(p.Runs), n/4) // released runs are claimable again; finished and held ones are not
		}},
		{"RacingAcquirersHaveExactlyOneHolder", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			var wins atomic.Int64
			var rc race
			rc.run(16, func(i int) {
				call := rc.now()
				_, err := e.st.TryAcquireLease(ctx, "res", fmt.Sprintf("holder-%d", i), time.Minute)
				rc.record(i, call)
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, state.ErrLeaseHeld) {
					t.Errorf("acquire: %v", err)
				}
			})
			checkOverlap(t, "acquires", rc.spans)
			is.Equal(wins.Load(), int64(1)) // of 16 racing acquirers exactly one holds the lease
		}},
		{"RacingCompareAndSetIncrementsAreExact", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			const workers, each = 32, 5
			var conflicts atomic.Int64
			var rc race
			rc.run(workers, func(w int) {
				for n := 0; n < each; {
					cur, ver := 0, int64(0)
					en, err := e.st.Get(ctx, "ctr")
					if err == nil {
						cur, _ = strconv.Atoi(string(en.Value))
						ver = en.Version
					} else if !errors.Is(err, state.ErrNotFound) {
						t.Errorf("get: %v", err)
						return
					}
					call := rc.now()
					_, err = e.st.Set(ctx, "ctr", cur+1, state.IfVersion(ver))
					rc.record(w, call)
					switch {
					case err == nil:
						n++
					case errors.Is(err, state.ErrConflict):
						conflicts.Add(1)
					default:
						t.Errorf("set: %v", err)
						return
					}
				}
			})
			checkOverlap(t, "compare-and-sets", rc.spans)
			en, err := e.st.Get(ctx, "ctr")
			is.NoErr(err)
			is.Equal(string(en.Value), strconv.Itoa(workers*each)) // compare-and-set increments by 32 racers reach the exact count
			evs, _ := e.st.History(ctx, state.HistoryQuery{Key: "ctr", Limit: state.MaxHistoryLimit})
			is.Equal(len(evs), workers*each) // every acknowledged write is in history, and no other
			t.Logf("%d conflicts retried", conflicts.Load())
		}},
	}
}
