package backendtest

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/calltest"
	"github.com/statesidecar/state/statetest"
)

// pathCases check that a driver's fast paths write exactly what package
// state's portable code writes, byte for byte: the same story is played
// through both, each in a namespace of its own, and the two namespaces
// must end up holding the same records and the same history. Revisions
// and event ids are compared by their order (each namespace numbers its
// own, from wherever the driver starts them), run ids by the order of
// their creation.
func pathCases() []testCase[driverEnv] {
	return []testCase[driverEnv]{
		{"FastPathsWriteWhatThePortableCodeWrites", testFastPaths},
		{"SetIntentWritesWhatAGenericCommitWrites", testSetIntent},
	}
}

// testFastPaths plays the story of runStory through the driver as it is
// (its Claimer, Leaser and Updater) and through HideOptional, and compares
// what the two namespaces hold.
func testFastPaths(t *testing.T, e driverEnv) {
	fast := dumpStory(t, e.d, e.d, e.ns+"f")
	portable := dumpStory(t, e.d, HideOptional(e.d), e.ns+"p")
	if len(fast) != len(portable) {
		t.Fatalf("the fast paths wrote %d records and events, the portable code %d:\nfast:\n%s\nportable:\n%s",
			len(fast), len(portable), strings.Join(fast, "\n"), strings.Join(portable, "\n"))
	}
	for i := range fast {
		if fast[i] != portable[i] {
			t.Errorf("the fast paths and the portable code wrote different things:\nfast:     %s\nportable: %s", fast[i], portable[i])
		}
	}
}

// dumpStory plays a story of claims, heartbeats, takeovers, releases and
// lease transitions on a store over via in namespace ns, with a clock of
// its own, and returns every record and event of ns as d holds them.
// Every claim (lease call) of the story must be served by one call of the
// driver's Claimer (Leaser), when via has one: the fast path, not the
// portable code after a backend.ErrSkip.
func dumpStory(t *testing.T, d, via backend.Driver, ns string) []string {
	t.Helper()
	ctx := context.Background()
	clk := statetest.NewClock()
	calls := &calltest.Log{}
	st, err := state.New(via, &state.Options{Clock: clk, SweepInterval: -1, Namespace: ns, Tracer: calls})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
	}
	refused := func(err error, what string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: %s succeeded", ns, what)
		}
	}
	_, claimer := via.(backend.Claimer)
	_, leaser := via.(backend.Leaser)
	// served runs f, a claim or a lease call, and checks that the
	// driver's fast path served it in one call.
	// A call made for a principal may be declined by the fast path
	// (backend.ErrSkip, when the driver cannot record the event's writer
	// natively) and then served by the portable code; nativeWriters
	// counts those the fast path served alone.
	audited, nativeWriters := false, 0
	served := func(native bool, op string, f func() error) error {
		t.Helper()
		var err error
		got := calls.During(func() { err = f() })
		// The store checks the backend's configuration once, in the
		// background, when it starts: that call may land in any window.
		got = slices.DeleteFunc(got, func(c string) bool { return c == "check_config" })
		switch {
		case !native:
		case slices.Equal(got, []string{op}):
			if audited {
				nativeWriters++
			}
		case audited && len(got) > 1 && got[0] == op:
			// declined, then served by the portable code
		default:
			t.Errorf("%s: a call the driver's fast path (%s) serves made the backend calls %v", ns, op, got)
		}
		return err
	}
	claimIn := func(ctx context.Context, id, agent string, opts ...state.ClaimOption) error {
		t.Helper()
		return served(claimer, "claim", func() error { _, err := st.ClaimRun(ctx, id, agent, opts...); return err })
	}
	claim := func(id, agent string, opts ...state.ClaimOption) error {
		t.Helper()
		return claimIn(ctx, id, agent, opts...)
	}
	lease := func(f func() error) error {
		t.Helper()
		return served(leaser, "lease", f)
	}

	// Names, tags and agents with every character Go's JSON encoder escapes.
	tags := map[string]string{"z": "1", "a<b>": "&\u2028\"\\/\t\x01", "é": "ü"}
	agentA, agentB := `agent "A" <&>`, "agent/B\u2029"
	run, err := st.CreateRun(ctx, "job \"<1>\"", tags, state.WithAgent(agentA))
	must(err)
	must(claim(run.ID, agentA, state.WithClaimTTL(time.Minute)))           // a fresh claim
	must(claim(run.ID, agentA, state.WithClaimTTL(2*time.Minute)))         // a heartbeat
	refused(claim(run.ID, agentB), "a claim of a run another agent holds") // held
	_, err = st.CheckpointRun(ctx, run.ID, 1<<53, map[string]any{"big": 9007199254740993}, state.WithAgent(agentA))
	must(err)
	must(claim(run.ID, agentA, state.WithClaimTTL(time.Minute))) // a heartbeat of a running run
	clk.Advance(3 * time.Minute)
	must(claim(run.ID, agentB, state.WithClaimTTL(time.Second))) // a takeover
	_, err = st.ReleaseRun(ctx, run.ID, agentB)
	must(err)
	must(claim(run.ID, agentA)) // a claim after a release
	kid, err := st.CreateRun(ctx, "kid", nil, state.WithParent(run.ID))
	must(err)
	must(claim(kid.ID, agentB)) // a child: its parent's counter of claimed children too
	other, err := st.CreateRun(ctx, "other", nil)
	must(err)
	must(claim(other.ID, agentB, state.WithClaimTTL(time.Second)))
	clk.Advance(time.Second)
	must(claim(other.ID, agentB)) // the same agent after its own claim expired
	_, err = st.CompleteRun(ctx, other.ID)
	must(err)
	refused(claim(other.ID, agentA), "a claim of a finished run")
	join, err := st.CreateRun(ctx, "join", nil, state.WithJoin())
	must(err)
	refused(claim(join.ID, agentA), "a claim of a join parent waiting for its children")
	refused(claim("wf-000000000000", agentA), "a claim of an unknown run")

	res := "res <1>"
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, res, agentA, time.Minute); return err }))
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, res, agentA, 2*time.Minute); return err })) // the holder again
	refused(lease(func() error { _, err := st.TryAcquireLease(ctx, res, agentB, time.Minute); return err }), "an acquire of a held lease")
	refused(lease(func() error { _, err := st.RenewLease(ctx, res, agentB, time.Minute); return err }), "a renew by another")
	must(lease(func() error { _, err := st.RenewLease(ctx, res, agentA, time.Second); return err }))
	clk.Advance(time.Second)
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, res, agentB, time.Second); return err })) // a takeover
	var released bool
	must(lease(func() error { var err error; released, err = st.ReleaseLease(ctx, res, agentA); return err }))
	if released {
		t.Fatalf("%s: a release by a former holder succeeded", ns)
	}
	clk.Advance(time.Second)
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, res, agentB, time.Minute); return err })) // its own expired lease
	must(lease(func() error { var err error; released, err = st.ReleaseLease(ctx, res, agentB); return err }))
	if !released {
		t.Fatalf("%s: a release by the holder failed", ns)
	}
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, "res <2>", agentA, time.Minute); return err }))

	// Claims and lease calls made for an authenticated principal: their
	// events' writer is the agent joined with it (package state's
	// writerOf), which History splits back; so is that of an agent id
	// holding the separator, made without one.
	audited = true
	principal, agentC := "alice <&> \x1f\u2028", "agent\x1fC"
	pctx := state.WithPrincipal(ctx, principal)
	aud, err := st.CreateRun(ctx, "audited", nil)
	must(err)
	must(claimIn(pctx, aud.ID, agentA, state.WithClaimTTL(time.Minute))) // a fresh claim
	must(claimIn(pctx, aud.ID, agentA, state.WithClaimTTL(time.Minute))) // a heartbeat
	refused(claimIn(pctx, aud.ID, agentB), "a claim of a run another agent holds, for a principal")
	clk.Advance(2 * time.Minute)
	must(claim(aud.ID, agentC)) // a takeover by an agent id holding the separator
	res3 := "res <3>"
	must(lease(func() error { _, err := st.TryAcquireLease(pctx, res3, agentA, time.Second); return err }))
	must(lease(func() error { _, err := st.RenewLease(pctx, res3, agentA, time.Minute); return err }))
	refused(lease(func() error { _, err := st.TryAcquireLease(pctx, res3, agentB, time.Minute); return err }), "an acquire of a held lease, for a principal")
	must(lease(func() error { var err error; released, err = st.ReleaseLease(pctx, res3, agentA); return err }))
	if !released {
		t.Fatalf("%s: a release by the holder, for a principal, failed", ns)
	}
	must(lease(func() error { _, err := st.TryAcquireLease(ctx, res3, agentC, time.Minute); return err }))
	audited = false
	checkPrincipals(t, ctx, st, ns, aud.ID, res3, agentA, agentC, principal)
	if claimer && leaser {
		t.Logf("%s: the fast paths served %d of the 9 calls made for a principal alone", ns, nativeWriters)
	}

	ids := strings.NewReplacer(run.ID, "<run>", kid.ID, "<kid>", other.ID, "<other>", join.ID, "<join>",
		aud.ID, "<audited>", backend.EscapeID(run.ID), "<run>")
	return dumpNS(t, d, ns, clk.Now(), ids)
}

// checkPrincipals checks that History shows, for the claims of run and
// the lease calls on resource made by the story for principal (by agent)
// and by agentC (whose id holds the separator, without one), the agent id
// and the principal apart.
func checkPrincipals(t *testing.T, ctx context.Context, st *state.Store, ns, run, resource, agent, agentC, principal string) {
	t.Helper()
	// What package state records of a principal holding the separator.
	recorded := strings.ReplaceAll(principal, "\x1f", "?")
	for _, c := range []struct {
		key  string
		want []string // agent/principal, newest first
	}{
		{run, []string{agentC + "/", agent + "/" + recorded, agent + "/" + recorded}},
		{resource, []string{agentC + "/", agent + "/" + recorded, agent + "/" + recorded, agent + "/" + recorded}},
	} {
		evs, err := st.History(ctx, state.HistoryQuery{Key: c.key, Limit: len(c.want)})
		if err != nil {
			t.Fatalf("%s: history of %q: %v", ns, c.key, err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.AgentID+"/"+e.Principal)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: history of %q shows agent/principal %q, want %q", ns, c.key, got, c.want)
		}
	}
}

// leaseFence finds the fence of a lease's history event.
var leaseFence = regexp.MustCompile(`"fence":(\d+)`)

// dumpNS returns every record (in key order) and event (newest first) of
// namespace ns as d holds them at now, with ids replaced, and revisions,
// event ids and lease fences (which are revisions) replaced by their rank
// among them.
func dumpNS(t *testing.T, d backend.Driver, ns string, now time.Time, ids *strings.Replacer) []string {
	t.Helper()
	ctx := context.Background()
	recs, err := d.List(ctx, &backend.ListQuery{NS: ns, Limit: 1000, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rank := revisionRanks(recs, evs)
	var out []string
	for _, r := range recs {
		out = append(out, ids.Replace(fmt.Sprintf("record %s %q w=%q rev=%s crev=%s t=%d x=%d", r.Key, r.Value,
			r.Writer, rank(r.Revision), rank(r.CreateRevision), unixMs(r.UpdatedAt), unixMs(r.ExpiresAt))))
	}
	slices.Sort(out) // the random run ids ordered the keys
	fence := func(e backend.Event, v []byte) string {
		if !strings.HasPrefix(e.Op, "lease.") {
			return string(v)
		}
		return leaseFence.ReplaceAllStringFunc(string(v), func(f string) string {
			n, _ := strconv.ParseInt(f[len(`"fence":`):], 10, 64)
			if n == 0 {
				return f
			}
			return `"fence":` + rank(n)
		})
	}
	for _, e := range evs {
		out = append(out, ids.Replace(fmt.Sprintf("event %s rev=%s %s %s value=%s prev=%s w=%q t=%d", rank(e.ID),
			rank(e.Revision), e.Key, e.Op, fence(e, e.Value), fence(e, e.Prev), e.Writer, unixMs(e.Time))))
	}
	return out
}

// unixMs returns t in Unix milliseconds, 0 for the zero time.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// revisionRanks returns a function naming each revision or event id of
// recs and evs by its rank among them ("#1" the smallest).
func revisionRanks(recs []backend.Record, evs []backend.Event) func(int64) string {
	var all []int64
	for _, r := range recs {
		all = append(all, r.Revision, r.CreateRevision)
	}
	for _, e := range evs {
		all = append(all, e.ID, e.Revision)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	return func(n int64) string {
		i, ok := slices.BinarySearch(all, n)
		if !ok {
			return "?" + strconv.FormatInt(n, 10)
		}
		return "#" + strconv.Itoa(i+1)
	}
}

// testSetIntent plays a story of Sets (one put and its own event, with and
// without a condition, over absent, live and expired records, with and
// without TTLs) twice: as package state sends them (backend.IntentSet),
// which a driver may serve with a faster path, and as commits of
// IntentAny. The results, the records and the history must be the same.
func testSetIntent(t *testing.T, e driverEnv) {
	fast := playSets(t, e.d, e.ns+"s", backend.IntentSet)
	generic := playSets(t, e.d, e.ns+"g", backend.IntentAny)
	if len(fast) != len(generic) {
		t.Fatalf("Sets gave %d lines, generic commits %d:\n%s\n%s", len(fast), len(generic),
			strings.Join(fast, "\n"), strings.Join(generic, "\n"))
	}
	for i := range fast {
		if fast[i] != generic[i] {
			t.Errorf("a Set and a generic commit wrote different things:\nset:     %s\ncommit:  %s", fast[i], generic[i])
		}
	}
}

// playSets commits the story in namespace ns as commits of intent in and
// returns every result, record and event as text, revisions by rank.
func playSets(t *testing.T, d backend.Driver, ns string, in backend.Intent) []string {
	t.Helper()
	ctx := context.Background()
	now := t0
	var results []backend.Result
	set := func(key, value, writer string, ttl time.Duration, cond *int64) backend.Result {
		t.Helper()
		txn := &backend.Txn{NS: ns, Now: now, Intent: in,
			Then:   []backend.Op{{Kind: backend.OpPut, Key: "k/" + key, Value: []byte(value), Writer: writer, TTL: ttl, Time: now.Add(-time.Second)}},
			Events: []backend.Event{{Key: key, Op: "kv.set", Value: []byte(value), PrevOf: "k/" + key, Writer: writer}},
		}
		if cond != nil {
			txn.If = []backend.Cond{{Key: "k/" + key, Revision: *cond}}
		}
		res, err := d.Commit(ctx, txn)
		if err != nil {
			t.Fatalf("%s: set %s: %v", ns, key, err)
		}
		results = append(results, res)
		return res
	}
	rev := func(n int64) *int64 { return &n }

	r1 := set("a", `"one"`, "w1", 0, nil)              // a new record
	r2 := set("a", `"two"`, "w2", time.Minute, nil)    // a live one gains a TTL
	set("a", `"three"`, "", 0, rev(r1.Revision))       // a failed condition
	r4 := set("a", `"three"`, "", 0, rev(r2.Revision)) // a met one drops the TTL
	set("b", `{"x":[1,2]}`, "w1", time.Second, rev(0)) // absent, as required
	set("b", `"again"`, "w1", 0, rev(0))               // present: refused
	now = now.Add(2 * time.Second)
	set("b", `""`, "", time.Hour, rev(0)) // expired counts as absent
	set("a", "", "w3", 0, rev(r4.Revision))
	now = now.Add(2 * time.Hour)
	set("b", `"after expiry"`, "w2", 0, nil) // no previous value
	if _, err := d.Commit(ctx, &backend.Txn{NS: ns, Now: now, Then: []backend.Op{{Kind: backend.OpDelete, Key: "k/a"}}}); err != nil {
		t.Fatal(err)
	}
	set("a", `"reborn"`, "w1", time.Minute, nil) // after a delete

	recs, err := d.GetMany(ctx, &backend.GetQuery{NS: ns, Keys: []string{"k/a", "k/b"}, Now: now, IncludeExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	of, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Key: "a", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	rank := revisionRanks(recs, evs)
	var out []string
	for _, res := range results {
		cur := "0"
		if res.Current != 0 {
			cur = rank(res.Current)
		}
		out = append(out, fmt.Sprintf("result committed=%v rev=%s failed=%d current=%s now=%d", res.Committed,
			rank(res.Revision), res.Failed, cur, unixMs(res.Now)))
	}
	for _, r := range recs {
		out = append(out, fmt.Sprintf("record %s %q w=%q rev=%s crev=%s t=%d x=%d expired=%v", r.Key, r.Value, r.Writer,
			rank(r.Revision), rank(r.CreateRevision), unixMs(r.UpdatedAt), unixMs(r.ExpiresAt), r.Expired))
	}
	listed, err := d.List(ctx, &backend.ListQuery{NS: ns, Limit: 10, Now: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		out = append(out, "listed "+r.Key)
	}
	for _, e := range append(evs, of...) {
		out = append(out, fmt.Sprintf("event %s rev=%s %s %s value=%q prev=%q w=%q t=%d", rank(e.ID), rank(e.Revision),
			e.Key, e.Op, e.Value, e.Prev, e.Writer, unixMs(e.Time)))
	}
	c, err := d.Count(ctx, &backend.CountQuery{NS: ns, Prefixes: []string{"k/"}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, fmt.Sprintf("count %v", c))
}
