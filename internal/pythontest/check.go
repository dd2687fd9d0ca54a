package pythontest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
)

// From says which Python backend a store was imported from.
type From int

// The Python backends.
const (
	FromSQLite From = iota + 1
	FromRedis
)

// Slack is how far an imported expiry may be from the Python one: the time
// an import takes between reading a record and committing it, and, for
// Redis, between writing the fixture and reading it, on a busy machine.
const Slack = 30 * time.Second

// Check checks that st holds everything the importer must bring over from
// the fixture, written by WriteSQLite or WriteRedis, and nothing else:
// every live entry with its value (and, from SQLite, the writer and time of
// its last history row), TTL and remaining lifetime; every run with its id,
// name, tags, status, agent, attempt, last step, outputs and times, open
// runs claimable; every session; every live lease held by its holder; from
// SQLite every history row with its key, values, agent and time, in order;
// and the counts.
func (f *Fixture) Check(t testing.TB, st *state.Store, from From) {
	t.Helper()
	ctx := context.Background()
	live := 0
	for _, e := range f.Entries {
		got, err := st.Get(ctx, e.Key)
		if e.ExpiresAt != 0 && e.ExpiresAt <= float64(f.Now.Unix()) {
			if !errors.Is(err, state.ErrNotFound) {
				t.Errorf("entry %q expired in Python, but the store has it: %+v, %v", e.Key, got, err)
			}
			continue
		}
		live++
		if err != nil {
			t.Errorf("entry %q did not arrive: %v", e.Key, err)
			continue
		}
		if want := compact(t, e.JSON); !bytes.Equal(got.Value, want) {
			t.Errorf("entry %q: value %s, want %s", e.Key, got.Value, want)
		}
		checkExpiry(t, "entry "+e.Key, got.ExpiresAt, e.ExpiresAt)
		if from == FromSQLite {
			agent, at := f.lastWrite(e)
			if got.AgentID != agent || at != 0 && !got.UpdatedAt.Equal(epoch(at)) {
				t.Errorf("entry %q: writer %q at %v, want %q at %v (its last history row)", e.Key, got.AgentID, got.UpdatedAt, agent, epoch(at))
			}
		}
	}
	byStatus := map[state.Status]int64{}
	for _, r := range f.Runs {
		byStatus[state.Status(r.Status)]++
		f.checkRun(t, st, r)
	}
	for _, o := range append(slices.Clone(f.Orphans), Output{RunID: f.Dangling[0]}) {
		if _, err := st.GetRun(ctx, o.RunID); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("run %s does not exist in Python (only an output or an index entry of it does), but the store has it: %v", o.RunID, err)
		}
	}
	for _, s := range f.Sessions {
		got, err := st.GetSession(ctx, s.ID)
		if err != nil {
			t.Errorf("session %q did not arrive: %v", s.ID, err)
			continue
		}
		if want := compact(t, s.JSON); !bytes.Equal(got.Context, want) || !got.ExpiresAt.IsZero() {
			t.Errorf("session %q: %s (expires %v), want %s without expiry", s.ID, got.Context, got.ExpiresAt, want)
		}
		if from == FromSQLite && !got.UpdatedAt.Equal(epoch(s.UpdatedAt)) {
			t.Errorf("session %q: updated %v, want %v", s.ID, got.UpdatedAt, epoch(s.UpdatedAt))
		}
	}
	leases := 0
	for _, l := range f.Leases {
		got, err := st.GetLease(ctx, l.Resource)
		if l.ExpiresAt <= float64(f.Now.Unix()) {
			if !errors.Is(err, state.ErrNotFound) {
				t.Errorf("lease %q expired in Python, but the store has it: %+v, %v", l.Resource, got, err)
			}
			continue
		}
		leases++
		if err != nil || got.Holder != l.Holder || got.Fence == 0 {
			t.Errorf("lease %q: %+v, %v; want it held by %q with a fence", l.Resource, got, err, l.Holder)
			continue
		}
		checkExpiry(t, "lease "+l.Resource, got.ExpiresAt, l.ExpiresAt)
	}
	if from == FromSQLite {
		f.checkHistory(t, st)
	}
	h, err := st.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range state.Statuses {
		if h.RunsByStatus[s] != byStatus[s] {
			t.Errorf("health counts %d %s runs, want %d", h.RunsByStatus[s], s, byStatus[s])
		}
	}
	if h.Keys != int64(live) || h.Runs != int64(len(f.Runs)) || h.Sessions != int64(len(f.Sessions)) || h.Leases != int64(leases) {
		t.Errorf("health counts %d keys, %d runs, %d sessions, %d leases; want %d, %d, %d, %d",
			h.Keys, h.Runs, h.Sessions, h.Leases, live, len(f.Runs), len(f.Sessions), leases)
	}
}

// lastWrite returns the agent and time of the newest history row of e when
// it wrote e's current value.
func (f *Fixture) lastWrite(e Entry) (string, float64) {
	for _, h := range slices.Backward(f.History) {
		if h.Key == e.Key {
			if h.New == e.JSON {
				return h.Agent, h.WrittenAt
			}
			break
		}
	}
	return "", 0
}

func (f *Fixture) checkRun(t testing.TB, st *state.Store, r Run) {
	t.Helper()
	ctx := context.Background()
	res, err := st.ResumeRun(ctx, r.ID)
	if err != nil {
		t.Errorf("run %s did not arrive: %v", r.ID, err)
		return
	}
	got := res.Run
	var tags map[string]string
	_ = json.Unmarshal([]byte(r.TagsJSON), &tags)
	attempt := int64(0)
	if r.Agent != "" {
		attempt = 1
	}
	if got.Name != r.Name || !maps.Equal(got.Tags, tags) || string(got.Status) != r.Status || got.AgentID != r.Agent ||
		got.LastStep != r.LastStep || got.Attempt != attempt || got.Fence != attempt ||
		!got.CreatedAt.Equal(epoch(r.CreatedAt)) || !got.UpdatedAt.Equal(epoch(r.UpdatedAt)) {
		t.Errorf("run %s arrived as %+v; want %+v with attempt and fence %d", r.ID, got, r, attempt)
	}
	if open := r.Status == "created" || r.Status == "claimed" || r.Status == "running"; got.Claimable != open {
		t.Errorf("run %s (%s) claimable = %v", r.ID, r.Status, got.Claimable)
	}
	steps := slices.Sorted(maps.Keys(r.Outputs))
	if len(res.Outputs) != len(steps) {
		t.Errorf("run %s: %d outputs, want %d", r.ID, len(res.Outputs), len(steps))
		return
	}
	for i, o := range res.Outputs {
		if want := compact(t, r.Outputs[steps[i]]); o.Step != steps[i] || !bytes.Equal(o.Output, want) {
			t.Errorf("run %s: output %d is step %d %s, want step %d %s", r.ID, i, o.Step, o.Output, steps[i], want)
		}
	}
}

// checkHistory checks that the Python history arrived in the order
// history_log gave it (written_at, then id, newest first), with the
// imported records' own events after it.
func (f *Fixture) checkHistory(t testing.TB, st *state.Store) {
	t.Helper()
	evs, err := st.History(context.Background(), state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var sets []state.Event
	for _, e := range evs {
		switch {
		case e.Op == "kv.set":
			sets = append(sets, e)
		case !strings.HasSuffix(e.Op, ".import"):
			t.Errorf("history holds an event an import does not write: %+v", e)
		case len(sets) > 0:
			t.Errorf("an import event (%s %s) is older than the Python history it brought", e.Op, e.Key)
		}
	}
	want := slices.Clone(f.History)
	slices.SortFunc(want, func(a, b History) int {
		if a.WrittenAt != b.WrittenAt {
			return -cmpFloat(a.WrittenAt, b.WrittenAt)
		}
		return -int(a.ID - b.ID)
	})
	if len(sets) != len(want) {
		t.Fatalf("history has %d kv.set events, want the %d Python rows", len(sets), len(want))
	}
	for i, h := range want {
		e := sets[i]
		var prev []byte
		if h.Prev != "" {
			prev = compact(t, h.Prev)
		}
		if e.Key != h.Key || !bytes.Equal(e.Value, compact(t, h.New)) || !bytes.Equal(e.Prev, prev) || e.AgentID != h.Agent || !e.Time.Equal(epoch(h.WrittenAt)) {
			t.Errorf("history entry %d: %s %s prev %s by %q at %v; want Python row %d: %s %s prev %s by %q at %v",
				i, e.Key, e.Value, e.Prev, e.AgentID, e.Time, h.ID, h.Key, h.New, h.Prev, h.Agent, epoch(h.WrittenAt))
		}
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// checkExpiry checks an imported expiry against the Python one (0: none).
func checkExpiry(t testing.TB, what string, got time.Time, want float64) {
	t.Helper()
	if want == 0 {
		if !got.IsZero() {
			t.Errorf("%s: expires at %v, want never", what, got)
		}
		return
	}
	if d := got.Sub(epoch(want)); d < -Slack || d > Slack {
		t.Errorf("%s: expires at %v, want %v (within %v)", what, got, epoch(want), Slack)
	}
}

// epoch converts Python epoch seconds to a time in milliseconds.
func epoch(s float64) time.Time { return time.UnixMilli(int64(math.Round(s * 1000))).UTC() }

func compact(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("fixture JSON %s: %v", s, err)
	}
	return b.Bytes()
}
