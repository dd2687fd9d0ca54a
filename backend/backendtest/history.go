package backendtest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

func ops(evs []state.Event) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Op)
	}
	return out
}

func historyCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"TrimHistoryRemovesOldEntriesOnly", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			const n, young = 200, 70
			for i := range n {
				_, err := e.st.Set(ctx, "k", i)
				is.NoErr(err)
				e.clk.Advance(time.Second)
			}
			cut := t0.Add((n - young) * time.Second)
			removed, err := e.st.TrimHistory(ctx, cut)
			is.NoErr(err)
			if _, ok := e.st.Driver().(backend.HistoryTrimmer); !ok {
				is.Equal(removed, int64(0)) // a driver that cannot trim removes nothing
				return
			}
			left, err := e.st.History(ctx, state.HistoryQuery{Limit: 1000})
			is.NoErr(err)
			is.Equal(int64(len(left)), n-removed) // it reports what it removed
			kept := 0
			for _, ev := range left {
				if !ev.Time.Before(cut) {
					kept++
				}
			}
			is.Equal(kept, young)                       // every entry from the bound on stays
			is.True(len(left)-young <= 64)              // at most 64 older ones stay
			is.True(removed >= n-young-64)              // the rest is gone
			is.True(!left[len(left)-1].Time.After(cut)) // what stays is the newest
			again, err := e.st.TrimHistory(ctx, t0)
			is.NoErr(err)
			is.Equal(again, int64(0)) // nothing is older than the first entry
		}},
		{"HistoryRecordsKeyValueTransitions", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, _ = e.st.Set(ctx, "k", "v1", state.WithAgent("a1"))
			e.clk.Advance(time.Second)
			_, _ = e.st.Set(ctx, "k", "v2", state.WithAgent("a2"))
			_, _ = e.st.Delete(ctx, "k")
			_, _ = e.st.Set(ctx, "other", 1)
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: "k"})
			is.NoErr(err)
			is.Equal(ops(evs), []string{"kv.delete", "kv.set", "kv.set"}) // sets and deletes are recorded, newest first
			is.Equal(string(evs[0].Prev), `"v2"`)                         // a delete records the value it removed
			is.Equal(evs[0].Value, json.RawMessage(nil))
			is.Equal(string(evs[1].Value), `"v2"`) // a set records the new value
			is.Equal(string(evs[1].Prev), `"v1"`)  // and the previous one
			is.Equal(evs[1].AgentID, "a2")         // and who wrote it
			is.True(evs[1].Time.Equal(t0.Add(time.Second)))
			is.Equal(evs[2].Prev, json.RawMessage(nil)) // a first write has no previous value
			all, _ := e.st.History(ctx, state.HistoryQuery{})
			is.Equal(len(all), 4)
			is.Equal(all[0].Key, "other") // without a key, all keys, newest first
			two, _ := e.st.History(ctx, state.HistoryQuery{Limit: 2})
			is.Equal(len(two), 2) // Limit is n
			older, _ := e.st.History(ctx, state.HistoryQuery{Before: two[1].ID})
			is.Equal(len(older), 2) // Before pages further back
		}},
		{"HistoryRecordsEveryWorkflowLeaseAndSessionTransition", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			r := mustCreate(t, e, "job", nil)
			c := mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Second))
			mustClaim(t, e, r.ID, "A", state.WithClaimTTL(time.Second))
			_, _ = e.st.CheckpointRun(ctx, r.ID, 1, "x", state.WithFence(c.Fence))
			e.clk.Advance(time.Second)
			mustClaim(t, e, r.ID, "B")
			_, _ = e.st.ReleaseRun(ctx, r.ID, "B")
			mustClaim(t, e, r.ID, "C")
			_, _ = e.st.CheckpointRun(ctx, r.ID, 2, "y", state.WithStatus(state.StatusDone))
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: r.ID, Limit: 100})
			is.NoErr(err)
			is.Equal(ops(evs), []string{"workflow.finish", "workflow.checkpoint", "workflow.claim", "workflow.release",
				"workflow.reclaim", "workflow.checkpoint", "workflow.heartbeat", "workflow.claim", "workflow.create"}) // every run transition is recorded
			var ev struct {
				Status  string `json:"status"`
				Attempt int64  `json:"attempt"`
				Step    *int64 `json:"step"`
			}
			is.NoErr(json.Unmarshal(evs[1].Value, &ev))
			is.Equal(ev.Status, "done") // a checkpoint's entry shows the run after it
			is.Equal(*ev.Step, int64(2))
			is.NoErr(json.Unmarshal(evs[4].Value, &ev))
			is.Equal(ev.Attempt, int64(2)) // a reclaim's entry shows the new attempt
			_, _ = e.st.TryAcquireLease(ctx, "res", "A", time.Second)
			_, _ = e.st.RenewLease(ctx, "res", "A", time.Second)
			_, _ = e.st.ReleaseLease(ctx, "res", "A")
			l, _ := e.st.TryAcquireLease(ctx, "res", "B", time.Second)
			evs, _ = e.st.History(ctx, state.HistoryQuery{Key: "res"})
			is.Equal(ops(evs), []string{"lease.acquire", "lease.release", "lease.renew", "lease.acquire"}) // every lease transition is recorded
			var le struct {
				Holder string `json:"holder"`
				Fence  int64  `json:"fence"`
			}
			is.NoErr(json.Unmarshal(evs[0].Value, &le))
			is.Equal(le, struct {
				Holder string `json:"holder"`
				Fence  int64  `json:"fence"`
			}{"B", l.Fence}) // a lease entry names its holder and fence
			_, _ = e.st.SetSession(ctx, "sess", map[string]int{"a": 1}, state.WithAgent("A"))
			_, _ = e.st.DeleteSession(ctx, "sess")
			evs, _ = e.st.History(ctx, state.HistoryQuery{Key: "sess"})
			is.Equal(ops(evs), []string{"session.delete", "session.save"}) // session saves and deletes are recorded
			is.Equal(evs[1].AgentID, "A")
		}},
		{"HistoryNMustBePositive", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.History(ctx, state.HistoryQuery{Limit: -1})
			var fe *state.FieldError
			is.True(errors.As(err, &fe))
			is.Equal(fe.Error(), "n must be >= 1, got -1") // the Python sidecar's message
		}},
		{"HistoryRetentionIsBounded", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			d := e.newDriver(t)
			if _, ok := d.(backend.Sweeper); !ok {
				t.Skip("driver has no Sweeper: history is not trimmed")
			}
			st, err := state.New(d, &state.Options{Clock: e.clk, SweepInterval: -1, Namespace: newNS(),
				HistoryMaxEvents: 3, HistoryMaxAge: time.Hour})
			is.NoErr(err)
			defer st.Close()
			for i := range 5 {
				_, err := st.Set(ctx, "k", i)
				is.NoErr(err)
			}
			_, err = st.Sweep(ctx)
			is.NoErr(err)
			evs, _ := st.History(ctx, state.HistoryQuery{Limit: 100})
			is.Equal(len(evs), 3)               // history keeps at most HistoryMaxEvents entries
			is.Equal(string(evs[2].Value), "2") // the oldest go first
			e.clk.Advance(2 * time.Hour)
			_, _ = st.Set(ctx, "k", "new")
			_, err = st.Sweep(ctx)
			is.NoErr(err)
			evs, _ = st.History(ctx, state.HistoryQuery{Limit: 100})
			is.Equal(len(evs), 1) // history drops entries older than HistoryMaxAge
		}},
	}
}
