package redisstate_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/statetest"
)

// replicas opens n stores over one Redis as n sidecar replicas would: each
// with a client of its own, all with the same prefix and namespace, all
// driven by one fake clock.
func replicas(t *testing.T, url string, n int) ([]*state.Store, []*redisstate.Driver, *statetest.Clock) {
	t.Helper()
	ctx := context.Background()
	prefix := redistest.Prefix()
	clk := statetest.NewClock()
	var sts []*state.Store
	var ds []*redisstate.Driver
	for range n {
		d, err := redisstate.Open(ctx, withParams(url, "prefix="+prefix))
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1, Namespace: "replicas"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		sts, ds = append(sts, st), append(ds, d)
	}
	t.Cleanup(func() { purgeVia(t, url, prefix) })
	return sts, ds, clk
}

// purgeVia deletes a prefix's keys through a client of its own (the
// replicas' may be closed).
func purgeVia(t *testing.T, url, prefix string) {
	ctx := context.Background()
	d, err := redisstate.Open(ctx, url)
	if err != nil {
		t.Errorf("deleting the test's keys: %v", err)
		return
	}
	defer d.Close()
	if err := redistest.Purge(ctx, d.Client(), prefix); err != nil {
		t.Errorf("deleting the test's keys: %v", err)
	}
}

func TestReplicas(t *testing.T) {
	testReplicas(t, redistest.URL(t))
}

func testReplicas(t *testing.T, url string) {
	t.Run("RacingClaimersHaveOneWinnerPerRun", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		sts, _, _ := replicas(t, url, 3)
		const runs, claimers = 20, 100
		var ids []string
		for i := range runs {
			r, err := sts[i%3].CreateRun(ctx, "job", map[string]string{"n": fmt.Sprint(i)})
			is.NoErr(err)
			ids = append(ids, r.ID)
		}
		var mu sync.Mutex
		winners := map[string][]string{}
		var wg sync.WaitGroup
		for c := range claimers {
			wg.Go(func() {
				st, agent := sts[c%3], fmt.Sprintf("agent-%d", c)
				order := rand.Perm(runs)
				for _, i := range order {
					_, err := st.ClaimRun(ctx, ids[i], agent)
					switch {
					case err == nil:
						mu.Lock()
						winners[ids[i]] = append(winners[ids[i]], agent)
						mu.Unlock()
					case !errors.Is(err, state.ErrClaimed):
						t.Errorf("claim %s by %s: %v", ids[i], agent, err)
					}
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			is.Equal(len(winners[id]), 1) // of 100 claimers on three replicas exactly one wins each run
			for _, st := range sts {
				r, err := st.GetRun(ctx, id)
				is.NoErr(err)
				is.Equal(r.AgentID, winners[id][0]) // every replica sees the winner
				is.Equal(r.Attempt, int64(1))
			}
		}
	})
	t.Run("RacingAcquirersHaveOneHolder", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		sts, _, _ := replicas(t, url, 3)
		var mu sync.Mutex
		var holders []string
		var wg sync.WaitGroup
		for c := range 100 {
			wg.Go(func() {
				holder := fmt.Sprintf("holder-%d", c)
				_, err := sts[c%3].TryAcquireLease(ctx, "deploy", holder, time.Minute)
				switch {
				case err == nil:
					mu.Lock()
					holders = append(holders, holder)
					mu.Unlock()
				case !errors.Is(err, state.ErrLeaseHeld):
					t.Errorf("acquire by %s: %v", holder, err)
				}
			})
		}
		wg.Wait()
		is.Equal(len(holders), 1) // of 100 acquirers on three replicas exactly one holds the lease
		for _, st := range sts {
			l, err := st.GetLease(ctx, "deploy")
			is.NoErr(err)
			is.Equal(l.Holder, holders[0])
		}
	})
	t.Run("KilledReplicasClaimIsTakenOverAndItsStaleWorkerFenced", func(t *testing.T) {
		t.Parallel()
		is := is.New(t)
		sts, ds, clk := replicas(t, url, 3)
		run, err := sts[0].CreateRun(ctx, "pr-review", nil)
		is.NoErr(err)
		first, err := sts[0].ClaimRun(ctx, run.ID, "worker-0", state.WithClaimTTL(30*time.Second))
		is.NoErr(err)
		_, err = sts[0].CheckpointRun(ctx, run.ID, 1, "step one", state.WithAgent("worker-0"), state.WithFence(first.Fence))
		is.NoErr(err)
		lease, err := sts[0].TryAcquireLease(ctx, "repo-lock", "worker-0", 30*time.Second)
		is.NoErr(err)

		// Replica 0 dies mid-run: its connections go away, nothing is released.
		is.NoErr(ds[0].Client().Close())
		_, err = sts[0].CheckpointRun(ctx, run.ID, 2, "lost", state.WithFence(first.Fence))
		is.True(err != nil) // the dead replica can no longer write

		_, err = sts[1].ClaimRun(ctx, run.ID, "worker-1")
		is.True(errors.Is(err, state.ErrClaimed)) // the claim is still live: no takeover yet
		clk.Advance(30 * time.Second)
		second, err := sts[1].ClaimRun(ctx, run.ID, "worker-1")
		is.NoErr(err)
		is.True(second.Reclaimed)               // once expired, another replica takes the run over
		is.True(second.Fence > first.Fence)     // with a higher fence
		is.Equal(second.Attempt, int64(2))      // and the next attempt
		is.Equal(second.Run.LastStep, int64(1)) // resuming from the last checkpoint
		res, err := sts[2].ResumeRun(ctx, run.ID)
		is.NoErr(err)
		is.Equal(len(res.Outputs), 1)
		is.Equal(string(res.Outputs[0].Output), `"step one"`)

		// The stale worker comes back through another replica.
		_, err = sts[2].CheckpointRun(ctx, run.ID, 2, "stale", state.WithAgent("worker-0"), state.WithFence(first.Fence))
		var nh *state.NotHeldError
		is.True(errors.As(err, &nh))    // the stale worker's checkpoint is rejected
		is.Equal(nh.Holder, "worker-1") // naming the new holder
		_, err = sts[2].CheckpointRun(ctx, run.ID, 2, "stale", state.WithFence(first.Fence))
		is.True(errors.Is(err, state.ErrNotHeld)) // a stale fence alone is rejected too
		_, err = sts[1].CheckpointRun(ctx, run.ID, 2, "step two", state.WithAgent("worker-1"), state.WithFence(second.Fence))
		is.NoErr(err)

		l2, err := sts[2].TryAcquireLease(ctx, "repo-lock", "worker-2", time.Minute)
		is.NoErr(err)
		is.True(l2.Takeover)            // the dead replica's lease expired and is taken over
		is.True(l2.Fence > lease.Fence) // with a higher fence
	})
}
