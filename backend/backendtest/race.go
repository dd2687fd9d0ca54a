package backendtest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

func raceCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"KeyValueOperationsAreLinearizable", linearizableCase},
		{"RacingClaimersHaveExactlyOneWinner", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			var wins, held atomic.Int64
			var winner atomic.Value
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() {
					agent := fmt.Sprintf("agent-%d", i)
					_, err := e.st.ClaimRun(ctx, r.ID, agent)
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
			}
			wg.Wait()
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
			var wg sync.WaitGroup
			for i := range 32 {
				wg.Go(func() {
					c, err := e.st.ClaimRun(ctx, r.ID, fmt.Sprintf("agent-%d", i))
					if err == nil {
						wins.Add(1)
						if c.Fence <= first.Fence {
							t.Errorf("takeover fence %d not above %d", c.Fence, first.Fence)
						}
					} else if !errors.Is(err, state.ErrClaimed) {
						t.Errorf("claim: %v", err)
					}
				})
			}
			wg.Wait()
			is.Equal(wins.Load(), int64(1)) // of 32 agents racing to take over an expired claim exactly one wins
		}},
		{"RacingAcquirersHaveExactlyOneHolder", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			var wins atomic.Int64
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					_, err := e.st.TryAcquire(ctx, "res", fmt.Sprintf("holder-%d", i), time.Minute)
					if err == nil {
						wins.Add(1)
					} else if !errors.Is(err, state.ErrLeaseHeld) {
						t.Errorf("acquire: %v", err)
					}
				})
			}
			wg.Wait()
			is.Equal(wins.Load(), int64(1)) // of 16 racing acquirers exactly one holds the lease
		}},
		{"RacingCompareAndSetIncrementsAreExact", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			const workers, each = 32, 5
			var wg sync.WaitGroup
			var conflicts atomic.Int64
			for range workers {
				wg.Go(func() {
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
						_, err = e.st.Set(ctx, "ctr", cur+1, state.IfVersion(ver))
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
			}
			wg.Wait()
			en, err := e.st.Get(ctx, "ctr")
			is.NoErr(err)
			is.Equal(string(en.Value), strconv.Itoa(workers*each)) // compare-and-set increments by 32 racers reach the exact count
			evs, _ := e.st.History(ctx, state.HistoryQuery{Key: "ctr", Limit: state.MaxHistoryLimit})
			is.Equal(len(evs), workers*each) // every acknowledged write is in history, and no other
			t.Logf("%d conflicts retried", conflicts.Load())
		}},
	}
}
