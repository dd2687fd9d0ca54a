package backendtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

// snapshot is everything a bad call might have changed.
type snapshot struct {
	Keys    []string
	Values  []string
	Run     state.Run
	Lease   state.Lease
	Session string
	Events  int64
}

func takeSnapshot(t *testing.T, e storeEnv, runID string) snapshot {
	t.Helper()
	var s snapshot
	p, err := e.st.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Keys = p.Keys
	es, _ := e.st.GetMany(ctx, p.Keys)
	for _, en := range es {
		s.Values = append(s.Values, fmt.Sprintf("%s@%d", en.Value, en.Version))
	}
	s.Run, _ = e.st.GetRun(ctx, runID)
	s.Lease, _ = e.st.GetLease(ctx, "l")
	ss, _ := e.st.GetSession(ctx, "s")
	s.Session = fmt.Sprintf("%s@%d", ss.Context, ss.Version)
	h, _ := e.st.Health(ctx)
	s.Events = h.Events
	return s
}

func badInputCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"BadInputIsRejectedNamingTheFieldAndChangesNothing", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, _ = e.st.Set(ctx, "k", 1)
			r := mustCreate(t, e, "job", nil)
			mustClaim(t, e, r.ID, "A")
			_, _ = e.st.TryAcquireLease(ctx, "l", "A", time.Minute)
			_, _ = e.st.SetSession(ctx, "s", map[string]int{"a": 1})
			before := takeSnapshot(t, e, r.ID)

			long := strings.Repeat("x", state.DefaultMaxKeyBytes+1)
			longID := strings.Repeat("x", state.DefaultMaxIDBytes+1)
			big := json.RawMessage(`"` + strings.Repeat("x", state.DefaultMaxValueBytes) + `"`)
			manyTags := map[string]string{}
			for i := range state.DefaultMaxTags + 1 {
				manyTags[fmt.Sprint(i)] = "v"
			}
			manyItems := make([]state.Item, state.DefaultMaxBatch+1)
			for i := range manyItems {
				manyItems[i] = state.Item{Key: fmt.Sprint(i), Value: i}
			}
			cases := []struct {
				field string
				call  func() error
			}{
				{"key", func() error { _, err := e.st.Set(ctx, "", 1); return err }},
				{"key", func() error { _, err := e.st.Set(ctx, long, 1); return err }},
				{"key", func() error { _, err := e.st.Set(ctx, "k\x00", 1); return err }},
				{"key", func() error { _, err := e.st.Set(ctx, "k\xff", 1); return err }},
				{"value", func() error { _, err := e.st.Set(ctx, "k", big); return err }},
				{"value", func() error { _, err := e.st.Set(ctx, "k", json.RawMessage(`{"a":`)); return err }},
				{"value", func() error { _, err := e.st.Set(ctx, "k", math.NaN()); return err }},
				{"value", func() error { _, err := e.st.Set(ctx, "k", func() {}); return err }},
				{"ttl", func() error { _, err := e.st.Set(ctx, "k", 1, state.WithTTL(0)); return err }},
				{"ttl", func() error { _, err := e.st.Set(ctx, "k", 1, state.WithTTL(-time.Second)); return err }},
				{"ttl", func() error { _, err := e.st.Set(ctx, "k", 1, state.WithTTL(time.Microsecond)); return err }},
				{"if_version", func() error { _, err := e.st.Set(ctx, "k", 1, state.IfVersion(-1)); return err }},
				{"agent_id", func() error { _, err := e.st.Set(ctx, "k", 1, state.WithAgent(longID)); return err }},
				{"key", func() error { _, err := e.st.Get(ctx, ""); return err }},
				{"key", func() error { _, err := e.st.Delete(ctx, ""); return err }},
				{"prefix", func() error { _, err := e.st.List(ctx, long); return err }},
				{"limit", func() error { _, err := e.st.List(ctx, "", state.WithLimit(-1)); return err }},
				{"limit", func() error { _, err := e.st.List(ctx, "", state.WithLimit(state.MaxListLimit+1)); return err }},
				{"cursor", func() error { _, err := e.st.List(ctx, "", state.WithCursor("!!")); return err }},
				{"items", func() error { _, err := e.st.SetMany(ctx, manyItems); return err }},
				{"items[1].key", func() error {
					_, err := e.st.SetMany(ctx, []state.Item{{Key: "a", Value: 1}, {Key: "a", Value: 2}})
					return err
				}},
				{"keys[0]", func() error { _, err := e.st.GetMany(ctx, []string{""}); return err }},
				{"name", func() error { _, err := e.st.CreateRun(ctx, "", nil); return err }},
				{"name", func() error { _, err := e.st.CreateRun(ctx, longID, nil); return err }},
				{"tags", func() error { _, err := e.st.CreateRun(ctx, "n", manyTags); return err }},
				{"tags", func() error { _, err := e.st.CreateRun(ctx, "n", map[string]string{"": "v"}); return err }},
				{"status", func() error { _, err := e.st.DiscoverRuns(ctx, state.RunQuery{Status: "bogus"}); return err }},
				{"limit", func() error { _, err := e.st.DiscoverRuns(ctx, state.RunQuery{Limit: -3}); return err }},
				{"run_id", func() error { _, err := e.st.ClaimRun(ctx, "", "A"); return err }},
				{"agent_id", func() error { _, err := e.st.ClaimRun(ctx, r.ID, ""); return err }},
				{"claim_ttl", func() error { _, err := e.st.ClaimRun(ctx, r.ID, "A", state.WithClaimTTL(-time.Second)); return err }},
				{"step", func() error { _, err := e.st.CheckpointRun(ctx, r.ID, -1, "x"); return err }},
				{"status", func() error { _, err := e.st.CheckpointRun(ctx, r.ID, 1, "x", state.WithStatus("bogus")); return err }},
				{"output", func() error { _, err := e.st.CheckpointRun(ctx, r.ID, 1, big); return err }},
				{"run_id", func() error { _, err := e.st.ResumeRun(ctx, ""); return err }},
				{"agent_id", func() error { _, err := e.st.ReleaseRun(ctx, r.ID, ""); return err }},
				{"resource_id", func() error { _, err := e.st.TryAcquireLease(ctx, "", "A", time.Minute); return err }},
				{"holder_id", func() error { _, err := e.st.TryAcquireLease(ctx, "l", "", time.Minute); return err }},
				{"ttl", func() error { _, err := e.st.TryAcquireLease(ctx, "l", "A", 0); return err }},
				{"ttl", func() error { _, err := e.st.RenewLease(ctx, "l", "A", -time.Second); return err }},
				{"holder_id", func() error { _, err := e.st.ReleaseLease(ctx, "l", ""); return err }},
				{"session_id", func() error { _, err := e.st.SetSession(ctx, "", map[string]int{}); return err }},
				{"context", func() error { _, err := e.st.SetSession(ctx, "s", []int{1}); return err }},
				{"context", func() error { _, err := e.st.SetSession(ctx, "s", big); return err }},
				{"n", func() error { _, err := e.st.History(ctx, state.HistoryQuery{Limit: -1}); return err }},
				{"n", func() error {
					_, err := e.st.History(ctx, state.HistoryQuery{Limit: state.MaxHistoryLimit + 1})
					return err
				}},
			}
			for i, c := range cases {
				err := c.call()
				var fe *state.FieldError
				if !errors.As(err, &fe) || !errors.Is(err, state.ErrInvalid) || fe.Field != c.field {
					t.Errorf("case %d: want a *FieldError naming %q, got %v", i, c.field, err)
				}
			}
			is.Equal(takeSnapshot(t, e, r.ID), before) // bad input must change nothing stored
		}},
	}
}
