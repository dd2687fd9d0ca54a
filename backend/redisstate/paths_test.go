package redisstate_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/internal/layout"
	"github.com/statesidecar/state/statetest"
)

// TestNativePathsWriteWhatThePortableCodeWrites runs one story of claims,
// heartbeats, takeovers and lease transitions twice over the same Redis:
// through the driver's Lua fast paths and through package state's portable
// code (backendtest.HideOptional), each in a namespace of its own with its
// own fake clock. Revisions and event ids count per namespace, so the two
// namespaces must end up holding the same records and the same history,
// byte for byte, once the random run ids are replaced by a placeholder.
func TestNativePathsWriteWhatThePortableCodeWrites(t *testing.T) {
	testNativePaths(t, sharedClient(t))
}

func testNativePaths(t *testing.T, rdb redis.UniversalClient) {
	d := newDriver(t, rdb)
	seedRevisions(t, d, "native", "portable")
	native := dump(t, d, d, "native")
	portable := dump(t, d, backendtest.HideOptional(d), "portable")
	if len(native) != len(portable) {
		t.Fatalf("native path wrote %d records and events, portable code %d:\nnative:\n%s\nportable:\n%s",
			len(native), len(portable), strings.Join(native, "\n"), strings.Join(portable, "\n"))
	}
	for i := range native {
		if native[i] != portable[i] {
			t.Errorf("native path and portable code differ:\nnative:   %s\nportable: %s", native[i], portable[i])
		}
	}
}

// dump plays the story on a store over via in namespace ns and returns
// every record and event of ns as d holds them, with run ids replaced by a
// placeholder.
func dump(t *testing.T, d, via backend.Driver, ns string) []string {
	t.Helper()
	ctx := context.Background()
	clk := statetest.NewClock()
	st, err := state.New(via, &state.Options{Clock: clk, SweepInterval: -1, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
	}
	// Names, tags and agents with every character Go's JSON encoder escapes.
	tags := map[string]string{"z": "1", "a<b>": "&\u2028\"\\/\t\x01", "é": "ü"}
	agentA, agentB := `agent "A" <&>`, "agent/B\u2029"
	run, err := st.CreateRun(ctx, "job \"<1>\"", tags, state.WithAgent(agentA))
	must(err)
	_, err = st.ClaimRun(ctx, run.ID, agentA, state.WithClaimTTL(time.Minute)) // fresh claim
	must(err)
	_, err = st.ClaimRun(ctx, run.ID, agentA, state.WithClaimTTL(2*time.Minute)) // heartbeat
	must(err)
	_, err = st.ClaimRun(ctx, run.ID, agentB) // held by A
	if err == nil {
		t.Fatalf("%s: claim of a held run succeeded", ns)
	}
	_, err = st.CheckpointRun(ctx, run.ID, 1<<53, map[string]any{"big": 9007199254740993}, state.WithAgent(agentA))
	must(err)
	clk.Advance(3 * time.Minute)
	_, err = st.ClaimRun(ctx, run.ID, agentB, state.WithClaimTTL(time.Second)) // takeover
	must(err)
	_, err = st.ReleaseRun(ctx, run.ID, agentB)
	must(err)
	_, err = st.ClaimRun(ctx, run.ID, agentA) // claim after a release
	must(err)
	kid, err := st.CreateRun(ctx, "kid", nil, state.WithParent(run.ID))
	must(err)
	_, err = st.ClaimRun(ctx, kid.ID, agentB) // a child: its parent's counter of claimed children too
	must(err)
	other, err := st.CreateRun(ctx, "other", nil)
	must(err)
	_, err = st.ClaimRun(ctx, other.ID, agentB, state.WithClaimTTL(time.Second))
	must(err)
	clk.Advance(time.Second)
	_, err = st.ClaimRun(ctx, other.ID, agentB) // the same agent after its own claim expired
	must(err)
	_, err = st.CompleteRun(ctx, other.ID)
	must(err)
	_, err = st.ClaimRun(ctx, other.ID, agentA) // finished
	if err == nil {
		t.Fatalf("%s: claim of a finished run succeeded", ns)
	}

	_, err = st.TryAcquireLease(ctx, "res <1>", agentA, time.Minute)
	must(err)
	_, err = st.TryAcquireLease(ctx, "res <1>", agentA, 2*time.Minute) // re-acquire by the holder
	must(err)
	_, err = st.TryAcquireLease(ctx, "res <1>", agentB, time.Minute) // held
	if err == nil {
		t.Fatalf("%s: acquire of a held lease succeeded", ns)
	}
	_, err = st.RenewLease(ctx, "res <1>", agentB, time.Minute) // not held
	if err == nil {
		t.Fatalf("%s: renew by a non-holder succeeded", ns)
	}
	_, err = st.RenewLease(ctx, "res <1>", agentA, time.Second)
	must(err)
	clk.Advance(time.Second)
	_, err = st.TryAcquireLease(ctx, "res <1>", agentB, time.Second) // takeover
	must(err)
	ok, err := st.ReleaseLease(ctx, "res <1>", agentA) // no longer held
	must(err)
	if ok {
		t.Fatalf("%s: release by a former holder succeeded", ns)
	}
	clk.Advance(time.Second)
	_, err = st.TryAcquireLease(ctx, "res <1>", agentB, time.Minute) // own expired lease: a new tenure
	must(err)
	ok, err = st.ReleaseLease(ctx, "res <1>", agentB)
	must(err)
	if !ok {
		t.Fatalf("%s: release by the holder failed", ns)
	}
	_, err = st.TryAcquireLease(ctx, "res <2>", agentA, time.Minute)
	must(err)

	norm := strings.NewReplacer(run.ID, "<run>", kid.ID, "<kid>", other.ID, "<other>")
	var out []string
	recs, err := d.List(ctx, &backend.ListQuery{NS: ns, Limit: 1000, Now: clk.Now()})
	must(err)
	for _, r := range recs {
		out = append(out, norm.Replace(fmt.Sprintf("record %s %q w=%q rev=%d crev=%d t=%d x=%d", r.Key, r.Value,
			r.Writer, r.Revision, r.CreateRevision, layout.Ms(r.UpdatedAt), layout.Ms(r.ExpiresAt))))
	}
	slices.Sort(out) // the random run ids ordered the keys
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 1000})
	must(err)
	for _, e := range evs {
		out = append(out, norm.Replace(fmt.Sprintf("event %d rev=%d %s %s value=%s prev=%s w=%q t=%d", e.ID, e.Revision,
			e.Key, e.Op, e.Value, e.Prev, e.Writer, layout.Ms(e.Time))))
	}
	return out
}
