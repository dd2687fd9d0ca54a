package backendtest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

func storeCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"HealthCountsWhatTheNamespaceHolds", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, _ = e.st.Set(ctx, "a", 1)
			_, _ = e.st.Set(ctx, "b", 1, state.WithTTL(time.Second))
			r1 := mustCreate(t, e, "x", nil)
			mustCreate(t, e, "y", nil)
			mustClaim(t, e, r1.ID, "A")
			_, _ = e.st.TryAcquireLease(ctx, "l1", "A", time.Minute)
			_, _ = e.st.TryAcquireLease(ctx, "l2", "A", time.Second)
			_, _ = e.st.SetSession(ctx, "s", map[string]int{})
			e.clk.Advance(time.Second)
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Status, "ok")
			is.Equal(h.Keys, int64(1)) // only live keys are counted
			is.Equal(h.Runs, int64(2)) // every run is counted
			is.Equal(h.RunsByStatus, map[state.Status]int64{"waiting": 0, "created": 1, "claimed": 1, "running": 0, "done": 0, "failed": 0})
			is.Equal(h.Leases, int64(1)) // only live leases are counted
			is.Equal(h.Sessions, int64(1))
			is.Equal(h.Events, int64(8)) // 2 sets, 2 creates, 1 claim, 2 acquires, 1 save
			is.Equal(h.Version, state.Version)
			is.True(h.Backend != "")
		}},
		{"HealthCountsRunsThroughEveryTransition", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			counts := func() map[state.Status]int64 {
				h, err := e.st.Health(ctx)
				is.NoErr(err)
				var sum int64
				for _, n := range h.RunsByStatus {
					sum += n
				}
				is.Equal(h.Runs, sum) // every run is in exactly one status
				return h.RunsByStatus
			}
			want := map[state.Status]int64{"waiting": 0, "created": 0, "claimed": 0, "running": 0, "done": 0, "failed": 0}
			step := func(what string, change map[state.Status]int64) {
				t.Helper()
				for st, d := range change {
					want[st] += d
				}
				if got := counts(); !reflect.DeepEqual(got, want) {
					t.Fatalf("after %s: counts %v, want %v", what, got, want)
				}
			}
			var ids []string
			for range 6 {
				ids = append(ids, mustCreate(t, e, "job", nil).ID)
			}
			step("creating 6", map[state.Status]int64{"created": 6})
			c := mustClaim(t, e, ids[0], "A", state.WithClaimTTL(time.Second))
			step("a claim", map[state.Status]int64{"created": -1, "claimed": 1})
			mustClaim(t, e, ids[0], "A", state.WithClaimTTL(time.Second))
			step("a heartbeat", nil)
			_, err := e.st.CheckpointRun(ctx, ids[0], 1, "x", state.WithFence(c.Fence))
			is.NoErr(err)
			step("a checkpoint of a claimed run", map[state.Status]int64{"claimed": -1, "running": 1})
			_, err = e.st.CheckpointRun(ctx, ids[1], 1, "x")
			is.NoErr(err)
			step("a checkpoint of a created run", map[state.Status]int64{"created": -1, "running": 1})
			e.clk.Advance(time.Second)
			mustClaim(t, e, ids[0], "B")
			step("a takeover", nil)
			_, err = e.st.CompleteRun(ctx, ids[0])
			is.NoErr(err)
			step("completing a running run", map[state.Status]int64{"running": -1, "done": 1})
			_, err = e.st.FailRun(ctx, ids[2])
			is.NoErr(err)
			step("failing a created run", map[state.Status]int64{"created": -1, "failed": 1})
			mustClaim(t, e, ids[3], "C")
			_, err = e.st.ReleaseRun(ctx, ids[3], "C")
			is.NoErr(err)
			step("a claim and a release", nil)
			mustClaim(t, e, ids[4], "D")
			_, err = e.st.CheckpointRun(ctx, ids[4], 2, "y", state.WithStatus(state.StatusDone))
			is.NoErr(err)
			step("a claimed run finished by a checkpoint", map[state.Status]int64{"created": -1, "done": 1})
			_, err = e.st.CompleteRun(ctx, ids[4])
			is.NoErr(err)
			step("completing a done run again", nil)
		}},
		{"ResetWipesTheNamespaceAndCountsWhatItCleared", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			other, err := e.st.Namespace(newNS())
			is.NoErr(err)
			_, _ = other.Set(ctx, "keep", 1)
			_, _ = e.st.Set(ctx, "a", 1)
			_, _ = e.st.Set(ctx, "b", 1, state.WithTTL(time.Second))
			r := mustCreate(t, e, "x", map[string]string{"k": "v"})
			_, _ = e.st.CheckpointRun(ctx, r.ID, 1, "out")
			_, _ = e.st.TryAcquireLease(ctx, "l", "A", time.Minute)
			_, _ = e.st.SetSession(ctx, "s", map[string]int{})
			e.clk.Advance(time.Second)
			n, err := e.st.Reset(ctx)
			is.NoErr(err)
			is.Equal(n, int64(6+6)) // 2 keys (one expired), 1 run, 1 output, 1 lease, 1 session, and 6 history entries
			h, _ := e.st.Health(ctx)
			is.Equal(h.Keys+h.Runs+h.Leases+h.Sessions+h.Events, int64(0)) // reset leaves nothing behind
			p, _ := e.st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"k": "v"}})
			is.Equal(len(p.Runs), 0) // indexes are wiped too
			ok, _ := other.Exists(ctx, "keep")
			is.True(ok) // reset leaves other namespaces alone
		}},
		{"NamespacesIsolateEverything", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			a, b := e.st, must(e.st.Namespace(newNS()))
			_, _ = a.Set(ctx, "k", "a")
			r := mustCreate(t, e, "job", map[string]string{"t": "1"})
			_, _ = a.TryAcquireLease(ctx, "l", "A", time.Minute)
			_, _ = a.SetSession(ctx, "s", map[string]int{})
			_, err := b.Get(ctx, "k")
			is.True(errors.Is(err, state.ErrNotFound)) // keys are per namespace
			_, err = b.GetRun(ctx, r.ID)
			is.True(errors.Is(err, state.ErrNotFound)) // runs are per namespace
			p, _ := b.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"t": "1"}})
			is.Equal(len(p.Runs), 0) // discovery is per namespace
			_, err = b.TryAcquireLease(ctx, "l", "B", time.Minute)
			is.NoErr(err) // leases are per namespace
			_, err = b.GetSession(ctx, "s")
			is.True(errors.Is(err, state.ErrNotFound)) // sessions are per namespace
			evs, _ := b.History(ctx, state.HistoryQuery{})
			is.Equal(len(evs), 1) // history is per namespace
			h, _ := b.Health(ctx)
			is.Equal(h.Keys+h.Runs+h.Sessions, int64(0)) // counts are per namespace
			is.Equal(b.NamespaceName() != a.NamespaceName(), true)
			_, err = a.Namespace("bad name!")
			is.True(errors.Is(err, state.ErrInvalid)) // namespace names are validated
		}},
		{"SweepRemovesExpiredRecordsPhysically", func(t *testing.T, e storeEnv) {
			if _, ok := e.st.Driver().(backend.Sweeper); !ok {
				t.Skip("driver has no Sweeper")
			}
			is := is.New(t)
			_, _ = e.st.Set(ctx, "gone", 1, state.WithTTL(time.Second))
			_, _ = e.st.Set(ctx, "kept", 1)
			e.clk.Advance(time.Second + state.DefaultSweepGrace)
			res, err := e.st.Sweep(ctx)
			is.NoErr(err)
			is.True(res.Records >= 1) // Sweep reports what it removed
			recs, err := e.st.Driver().GetMany(ctx, &backend.GetQuery{NS: e.st.NamespaceName(),
				Keys: []string{"k/gone", "k/kept"}, Now: e.clk.Now(), IncludeExpired: true})
			is.NoErr(err)
			is.True(!recs[0].Found()) // an expired entry is physically removed by Sweep
			is.True(recs[1].Found())  // a live entry stays
		}},
		{"ClosedStoreReturnsErrClosed", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			is.NoErr(e.st.Close())
			_, err := e.st.Set(ctx, "k", 1)
			is.True(errors.Is(err, state.ErrClosed)) // calls after Close return ErrClosed
			is.True(errors.Is(e.st.Close(), state.ErrClosed))
			h, err := e.st.Health(ctx)
			is.True(err != nil && h.Status != "ok") // health reports a closed store as an error
		}},
		{"CancelledContextChangesNothing", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			_, err := e.st.Set(cctx, "k", 1)
			is.True(errors.Is(err, context.Canceled)) // a cancelled call returns the context's error
			_, err = e.st.ClaimRun(cctx, "wf-000000000000", "A")
			is.True(errors.Is(err, context.Canceled))
			ok, _ := e.st.Exists(ctx, "k")
			is.True(!ok)
		}},
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
