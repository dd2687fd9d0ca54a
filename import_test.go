package state_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/statetest"
)

// TestImportEntriesKeepsValuesWritersTimesAndTTLs: imported entries read
// back with their value, writer and update time, expire after their
// remaining TTL, and an entry already there is kept, whatever it holds.
func TestImportEntriesKeepsValuesWritersTimesAndTTLs(t *testing.T) {
	ctx := context.Background()
	st, clk := statetest.NewStore(t)
	written := statetest.Epoch.Add(-time.Hour)
	if _, err := st.Set(ctx, "there", "mine"); err != nil {
		t.Fatal(err)
	}
	ok, err := st.ImportEntries(ctx, []state.ImportedEntry{
		{Key: "plan/1", Value: json.RawMessage(`{"steps": [1, 2], "big": 12345678901234567890}`), AgentID: "orchestrator", UpdatedAt: written},
		{Key: "tmp", Value: json.RawMessage(`null`), TTL: 1500 * time.Millisecond},
		{Key: "there", Value: json.RawMessage(`"theirs"`)},
	})
	if err != nil || !slices.Equal(ok, []bool{true, true, false}) {
		t.Fatalf("ImportEntries = %v, %v", ok, err)
	}
	e, err := st.Get(ctx, "plan/1")
	if err != nil || string(e.Value) != `{"steps":[1,2],"big":12345678901234567890}` || e.AgentID != "orchestrator" || !e.UpdatedAt.Equal(written) || !e.ExpiresAt.IsZero() {
		t.Errorf("imported entry %+v, %v", e, err)
	}
	e, err = st.Get(ctx, "tmp")
	if err != nil || string(e.Value) != "null" || !e.ExpiresAt.Equal(statetest.Epoch.Add(1500*time.Millisecond)) || !e.UpdatedAt.Equal(statetest.Epoch) {
		t.Errorf("imported entry with a TTL %+v, %v", e, err)
	}
	if e, _ := st.Get(ctx, "there"); string(e.Value) != `"mine"` {
		t.Errorf("an import overwrote an entry: %s", e.Value)
	}
	clk.Advance(1500 * time.Millisecond)
	if _, err := st.Get(ctx, "tmp"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("an imported entry outlived its TTL: %v", err)
	}
	// An expired entry is not there: importing over it writes.
	ok, err = st.ImportEntries(ctx, []state.ImportedEntry{{Key: "tmp", Value: json.RawMessage(`2`)}})
	if err != nil || !ok[0] {
		t.Errorf("import over an expired entry = %v, %v", ok, err)
	}
	evs, _ := st.History(ctx, state.HistoryQuery{Key: "plan/1"})
	if len(evs) != 1 || evs[0].Op != "kv.import" || evs[0].AgentID != "orchestrator" || string(evs[0].Value) != `{"steps":[1,2],"big":12345678901234567890}` {
		t.Errorf("history of an imported entry %+v", evs)
	}
	evs, _ = st.History(ctx, state.HistoryQuery{Key: "there"})
	if len(evs) != 1 || evs[0].Op != "kv.set" {
		t.Errorf("an entry kept as it was got history %+v", evs)
	}
}

// TestImportEntriesRefusesBadEntries: an invalid entry fails the whole
// batch with a *FieldError naming it, and nothing is written.
func TestImportEntriesRefusesBadEntries(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	good := state.ImportedEntry{Key: "a", Value: json.RawMessage(`1`)}
	cases := map[string]state.ImportedEntry{
		"entries[1].key":      {Key: "", Value: json.RawMessage(`1`)},
		"entries[1].value":    {Key: "b", Value: json.RawMessage(`{`)},
		"entries[1].value ":   {Key: "b"},
		"entries[1].ttl":      {Key: "b", Value: json.RawMessage(`1`), TTL: -time.Second},
		"entries[1].agent_id": {Key: "b", Value: json.RawMessage(`1`), AgentID: "a\x00"},
		"entries[1].key ":     {Key: "a", Value: json.RawMessage(`2`)},
	}
	for field, bad := range cases {
		_, err := st.ImportEntries(ctx, []state.ImportedEntry{good, bad})
		var fe *state.FieldError
		if !errors.As(err, &fe) || fe.Field != strings.TrimSpace(field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if h, _ := st.Health(ctx); h.Keys != 0 || h.Events != 0 {
		t.Errorf("refused batches wrote %d keys, %d events", h.Keys, h.Events)
	}
}

// TestImportSessionsAndLeases: sessions keep their context, agent and time;
// a live lease is held by its holder, who may renew and release it, keeps
// others out until its remaining TTL ends and then can be taken over; a
// lease or session already there is kept.
func TestImportSessionsAndLeases(t *testing.T) {
	ctx := context.Background()
	st, clk := statetest.NewStore(t)
	saved := statetest.Epoch.Add(-time.Minute)
	ok, err := st.ImportSessions(ctx, []state.ImportedSession{{ID: "worker-a:pr-42", Context: json.RawMessage(`{"next": "security"}`), UpdatedAt: saved}})
	if err != nil || !ok[0] {
		t.Fatal(ok, err)
	}
	ss, err := st.GetSession(ctx, "worker-a:pr-42")
	if err != nil || string(ss.Context) != `{"next":"security"}` || !ss.UpdatedAt.Equal(saved) {
		t.Errorf("imported session %+v, %v", ss, err)
	}
	if _, err := st.ImportSessions(ctx, []state.ImportedSession{{ID: "s", Context: json.RawMessage(`[1]`)}}); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("a session that is not an object: %v", err)
	}
	if _, err := st.TryAcquireLease(ctx, "held", "someone", time.Hour); err != nil {
		t.Fatal(err)
	}
	ok, err = st.ImportLeases(ctx, []state.ImportedLease{
		{Resource: "pr:42:comments", Holder: "worker-a", TTL: 30 * time.Second},
		{Resource: "held", Holder: "worker-b", TTL: time.Minute},
	})
	if err != nil || !slices.Equal(ok, []bool{true, false}) {
		t.Fatalf("ImportLeases = %v, %v", ok, err)
	}
	l, err := st.GetLease(ctx, "pr:42:comments")
	if err != nil || l.Holder != "worker-a" || !l.ExpiresAt.Equal(statetest.Epoch.Add(30*time.Second)) || l.Fence == 0 || l.TTL != 30*time.Second {
		t.Errorf("imported lease %+v, %v", l, err)
	}
	if _, err := st.TryAcquireLease(ctx, "pr:42:comments", "worker-c", time.Minute); !errors.Is(err, state.ErrLeaseHeld) {
		t.Errorf("another holder acquired an imported live lease: %v", err)
	}
	r, err := st.RenewLease(ctx, "pr:42:comments", "worker-a", time.Minute)
	if err != nil || r.Fence != l.Fence {
		t.Errorf("the holder renewing its imported lease: %+v, %v", r, err)
	}
	evs, _ := st.History(ctx, state.HistoryQuery{Key: "pr:42:comments", Limit: 5})
	if len(evs) != 2 || evs[1].Op != "lease.import" || string(evs[1].Value) != fmt.Sprintf(`{"holder":"worker-a","fence":%d,"expires_at":%d}`, l.Fence, l.ExpiresAt.UnixMilli()) {
		t.Errorf("history of an imported lease %+v", evs)
	}
	clk.Advance(time.Minute)
	if tk, err := st.TryAcquireLease(ctx, "pr:42:comments", "worker-c", time.Minute); err != nil || !tk.Takeover || tk.Fence <= l.Fence {
		t.Errorf("taking over an expired imported lease: %+v, %v", tk, err)
	}
	if l, _ := st.GetLease(ctx, "held"); l.Holder != "someone" {
		t.Errorf("an import replaced a live lease: %+v", l)
	}
	if _, err := st.ImportLeases(ctx, []state.ImportedLease{{Resource: "r", Holder: "h"}}); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("a lease without a TTL: %v", err)
	}
}

// TestImportHistoryKeepsTimesAndOrderAndSkipsWhatItHas: imported events
// keep their keys, ops, values, agents and times and read back in the
// source's order; importing the same log again appends only what is new.
func TestImportHistoryKeepsTimesAndOrderAndSkipsWhatItHas(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	at := func(s int) time.Time { return time.Unix(1718000000+int64(s), 0).UTC() }
	log := []state.ImportedEvent{
		{Seq: 1, Key: "k", Op: "kv.set", Value: json.RawMessage(`{"a": 1}`), AgentID: "x", Time: at(0)},
		{Seq: 2, Key: "k", Op: "kv.set", Value: json.RawMessage(`2`), Prev: json.RawMessage(`{"a": 1}`), Time: at(0)},
		{Seq: 5, Key: "j", Op: "kv.set", Value: json.RawMessage(`3`), AgentID: "y", Time: at(7)},
	}
	n, err := st.ImportHistory(ctx, "src", log[:2])
	if err != nil || n != 2 {
		t.Fatal(n, err)
	}
	n, err = st.ImportHistory(ctx, "src", log) // again, with one more
	if err != nil || n != 1 {
		t.Fatalf("importing a log again appended %d, %v; want only the new event", n, err)
	}
	if seq, err := st.ImportedHistory(ctx, "src"); err != nil || seq != 5 {
		t.Errorf("ImportedHistory = %d, %v", seq, err)
	}
	if seq, err := st.ImportedHistory(ctx, "other"); err != nil || seq != 0 {
		t.Errorf("ImportedHistory of another source = %d, %v", seq, err)
	}
	evs, err := st.History(ctx, state.HistoryQuery{Limit: 10})
	if err != nil || len(evs) != 3 {
		t.Fatalf("history %+v, %v", evs, err)
	}
	want := []string{`j kv.set 3  y 1718000007`, `k kv.set 2 {"a":1}  1718000000`, `k kv.set {"a":1}  x 1718000000`}
	for i, e := range evs {
		if got := fmt.Sprintf("%s %s %s %s %s %d", e.Key, e.Op, e.Value, e.Prev, e.AgentID, e.Time.Unix()); got != want[i] {
			t.Errorf("event %d: %s, want %s", i, got, want[i])
		}
	}
	n, err = st.ImportHistory(ctx, "another", log[:1])
	if err != nil || n != 1 {
		t.Errorf("another source's log: %d, %v", n, err)
	}
	for _, bad := range [][]state.ImportedEvent{
		{{Seq: 0, Key: "k", Op: "kv.set", Time: at(0)}},
		{{Seq: 9, Key: "k", Op: "kv.set", Time: at(0)}, {Seq: 8, Key: "k", Op: "kv.set", Time: at(0)}},
		{{Seq: 9, Key: "k", Op: "kv.set"}},
		{{Seq: 9, Key: "k", Op: "", Time: at(0)}},
		{{Seq: 9, Key: "k", Op: "kv.set", Value: json.RawMessage(`nope`), Time: at(0)}},
	} {
		if _, err := st.ImportHistory(ctx, "src", bad); !errors.Is(err, state.ErrInvalid) {
			t.Errorf("ImportHistory(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	if seq, _ := st.ImportedHistory(ctx, "src"); seq != 5 {
		t.Errorf("a refused import moved the mark to %d", seq)
	}
}
