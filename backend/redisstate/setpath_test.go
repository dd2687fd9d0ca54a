package redisstate_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/layout"
)

// TestSetScriptWritesWhatCommitWrites plays one story of Set-shaped commits
// (one put and its own event, with and without a condition, over absent,
// live and expired records, with and without TTLs) twice over the same
// Redis: once as package state sends them, which takes lua/set.lua, and
// once with each event's time spelled out, which takes the generic
// lua/commit.lua. Each runs in a namespace of its own, so the results, the
// records and the history must be the same, byte for byte.
func TestSetScriptWritesWhatCommitWrites(t *testing.T) {
	d := newDriver(t, sharedClient(t))
	seedRevisions(t, d, "fast", "generic")
	fast := playSets(t, d, "fast", false)
	generic := playSets(t, d, "generic", true)
	if len(fast) != len(generic) {
		t.Fatalf("set script gave %d lines, generic commit %d:\n%v\n%v", len(fast), len(generic), fast, generic)
	}
	for i := range fast {
		if fast[i] != generic[i] {
			t.Errorf("set script and generic commit differ:\nset:     %s\ncommit:  %s", fast[i], generic[i])
		}
	}
}

// seedRevisions starts the revision counters of namespaces nss at the same
// value: a fresh counter starts from Redis's clock, which differs between
// namespaces created a moment apart.
func seedRevisions(t *testing.T, d *redisstate.Driver, nss ...string) {
	t.Helper()
	for _, ns := range nss {
		if err := d.Client().Set(ctx, "{"+d.Prefix()+":"+ns+"}:rev", 1000, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// playSets commits the story in namespace ns, giving events their time
// explicitly when explicit is set, and returns every result, record and
// event as text.
func playSets(t *testing.T, d backend.Driver, ns string, explicit bool) []string {
	t.Helper()
	now := time.UnixMilli(1_700_000_000_000).UTC()
	var out []string
	set := func(key, value, writer string, ttl time.Duration, cond *int64) backend.Result {
		t.Helper()
		txn := &backend.Txn{NS: ns, Now: now,
			Then:   []backend.Op{{Kind: backend.OpPut, Key: "k/" + key, Value: []byte(value), Writer: writer, TTL: ttl, Time: now.Add(-time.Second)}},
			Events: []backend.Event{{Key: key, Op: "kv.set", Value: []byte(value), PrevOf: "k/" + key, Writer: writer}},
		}
		if cond != nil {
			txn.If = []backend.Cond{{Key: "k/" + key, Revision: *cond}}
		}
		if explicit {
			txn.Events[0].Time = now
		}
		res, err := d.Commit(ctx, txn)
		if err != nil {
			t.Fatalf("%s: set %s: %v", ns, key, err)
		}
		out = append(out, fmt.Sprintf("result %+v", res))
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
	for _, r := range recs {
		out = append(out, fmt.Sprintf("record %s %q w=%q rev=%d crev=%d t=%d x=%d expired=%v", r.Key, r.Value, r.Writer,
			r.Revision, r.CreateRevision, layout.Ms(r.UpdatedAt), layout.Ms(r.ExpiresAt), r.Expired))
	}
	listed, err := d.List(ctx, &backend.ListQuery{NS: ns, Limit: 10, Now: now.Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		out = append(out, "listed "+r.Key)
	}
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	of, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Key: "a", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range append(evs, of...) {
		out = append(out, fmt.Sprintf("event %d rev=%d %s %s value=%q prev=%q w=%q t=%d", e.ID, e.Revision, e.Key, e.Op,
			e.Value, e.Prev, e.Writer, layout.Ms(e.Time)))
	}
	c, err := d.Count(ctx, &backend.CountQuery{NS: ns, Prefixes: []string{"k/"}, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return append(out, fmt.Sprintf("count %v", c))
}
