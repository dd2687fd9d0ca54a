package redisstate_test

import (
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/statetest"
)

// TestPurgeLeavesNoKeyBehind checks the tests' cleanup: after a story that
// creates every kind of key (records, indexes, counters, the event log and
// per-key id lists, over several namespaces, with deletes, trims, sweeps and
// a reset), redistest.Purge, which follows the layout instead of scanning
// the shared database, leaves no key of the prefix.
func TestPurgeLeavesNoKeyBehind(t *testing.T) {
	rdb := sharedClient(t)
	prefix := redistest.Prefix()
	d := newDriverWithPrefix(t, rdb, prefix)
	clk := statetest.NewClock()
	st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1, HistoryMaxEvents: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, _ := st.Namespace("other")
	gone, _ := st.Namespace("gone")
	for i := range 30 {
		_, _ = st.Set(ctx, "k", i, state.WithTTL(time.Second))
		_, _ = other.Set(ctx, "k", i)
	}
	_, _ = st.Delete(ctx, "k")
	r, _ := st.CreateRun(ctx, "job", map[string]string{"a": "b"})
	_, _ = st.ClaimRun(ctx, r.ID, "A")
	_, _ = st.CheckpointRun(ctx, r.ID, 1, "x")
	_, _ = st.TryAcquireLease(ctx, "l", "A", time.Second)
	_, _ = st.SetSession(ctx, "s", map[string]int{})
	_, _ = gone.Set(ctx, "k", 1)
	_, _ = gone.Reset(ctx)
	clk.Advance(time.Hour)
	if _, err := st.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := redistest.Purge(ctx, rdb, prefix); err != nil {
		t.Fatal(err)
	}
	var left []string
	iter := rdb.Scan(ctx, 0, "{"+prefix+"[:}]*", 10000).Iterator()
	for iter.Next(ctx) {
		left = append(left, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("Purge left %d keys of the prefix: %q", len(left), left)
	}
}
