package pgstate_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/statetest"
)

// portable hides the driver's native paths but Update, so that package
// state claims with its read-modify-write.
type portable struct {
	backend.Driver
	backend.Updater
}

// TestNativeClaimWritesWhatThePortablePathWrites runs one workflow on two
// stores under the same injected clock, one claiming natively
// (backend.Claimer) and one through package state's portable path, and
// checks after each step that they answered alike and stored the same
// bytes: the run, the status counters and the history events, revisions
// included (under an injected clock they depend on the writes only).
func TestNativeClaimWritesWhatThePortablePathWrites(t *testing.T) {
	native, plain := newDriver(t), newDriver(t)
	clk := statetest.NewClock()
	open := func(d backend.Driver) *state.Store {
		st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1, Namespace: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	stores := []*state.Store{open(native), open(portable{plain, plain})}
	drivers := []backend.Driver{native, plain}
	var runID string
	steps := []struct {
		name string
		do   func(st *state.Store) (any, error)
	}{
		{"create", func(st *state.Store) (any, error) {
			r, err := st.CreateRun(ctx, "job", map[string]string{"team": "a<b>&\u2028"})
			runID = r.ID // the same on both stores: ids are random, so use the first
			return nil, err
		}},
		{"claim", func(st *state.Store) (any, error) {
			return st.ClaimRun(ctx, runID, "agent \"A\"\u00e9<", state.WithClaimTTL(30*time.Second))
		}},
		{"heartbeat", func(st *state.Store) (any, error) {
			return st.ClaimRun(ctx, runID, "agent \"A\"\u00e9<", state.WithClaimTTL(40*time.Second))
		}},
		{"held", func(st *state.Store) (any, error) { return st.ClaimRun(ctx, runID, "B") }},
		{"checkpoint", func(st *state.Store) (any, error) { return st.CheckpointRun(ctx, runID, 1, "x") }},
		{"expire", func(*state.Store) (any, error) { return nil, nil }},
		{"takeover", func(st *state.Store) (any, error) { return st.ClaimRun(ctx, runID, "B") }},
		{"release", func(st *state.Store) (any, error) { return st.ReleaseRun(ctx, runID, "B") }},
		{"claim after release", func(st *state.Store) (any, error) { return st.ClaimRun(ctx, runID, "C") }},
		{"complete", func(st *state.Store) (any, error) { return st.CompleteRun(ctx, runID) }},
		{"finished", func(st *state.Store) (any, error) { return st.ClaimRun(ctx, runID, "C") }},
		{"absent", func(st *state.Store) (any, error) { return st.ClaimRun(ctx, "wf-absent", "C") }},
	}
	for _, s := range steps {
		var answers [2]string
		for i, st := range stores {
			if s.name == "create" && i == 1 {
				// Run ids are random: the portable store gets a copy of what
				// the native one wrote, in one commit as CreateRun's.
				recs, err := drivers[0].List(ctx, &backend.ListQuery{NS: "ns", Limit: 100, Now: clk.Now()})
				if err != nil {
					t.Fatal(err)
				}
				txn := &backend.Txn{NS: "ns", Now: clk.Now()}
				for _, r := range recs {
					txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: r.Key, Value: r.Value, Writer: r.Writer, Time: r.UpdatedAt})
				}
				if _, err := drivers[1].Commit(ctx, txn); err != nil {
					t.Fatal(err)
				}
				continue
			}
			out, err := s.do(st)
			answers[i] = fmt.Sprintf("%+v %v", out, err)
		}
		if s.name == "create" {
			continue
		}
		if answers[0] != answers[1] {
			t.Errorf("%s: native answered\n%s\nportable\n%s", s.name, answers[0], answers[1])
		}
		run := func(d backend.Driver) string {
			recs, err := d.GetMany(ctx, &backend.GetQuery{NS: "ns", Keys: []string{"r/" + runID, "n/s/claimed", "n/s/unstarted"}, Now: clk.Now()})
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for _, r := range recs {
				fmt.Fprintf(&b, "%s=%s writer %q rev %d crev %d upd %d exp %v\n", r.Key, r.Value, r.Writer, r.Revision,
					r.CreateRevision, r.UpdatedAt.UnixMilli(), r.ExpiresAt)
			}
			return b.String()
		}
		if a, b := run(native), run(plain); a != b {
			t.Errorf("%s: native stored\n%s\nportable\n%s", s.name, a, b)
		}
		hist := func(d backend.Driver) []backend.Event {
			evs, err := d.History(ctx, &backend.HistoryQuery{NS: "ns", Key: runID, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			return evs
		}
		a, b := hist(native), hist(plain)
		if len(a) != len(b) || len(a) == 1 && (a[0].Op != b[0].Op || !bytes.Equal(a[0].Value, b[0].Value) ||
			!bytes.Equal(a[0].Prev, b[0].Prev) || a[0].Writer != b[0].Writer || !a[0].Time.Equal(b[0].Time)) {
			t.Errorf("%s: native's last event %+v, portable's %+v", s.name, a, b)
		}
		if s.name == "checkpoint" || s.name == "expire" {
			clk.Advance(41 * time.Second)
		}
	}
}

// TestConcurrentClaimsKeepTheCounter claims 16 created runs at once: the
// counter of claimed runs counts every claim, and its revision is the
// greatest of theirs. (The claims lock the counter before drawing a
// revision, so that its revisions increase with its writes; the window in
// which the opposite order would invert them is too narrow for this test
// to catch reliably.)
func TestConcurrentClaimsKeepTheCounter(t *testing.T) {
	d := newDriver(t)
	st, err := state.New(d, &state.Options{SweepInterval: -1, Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 16
	ids := make([]string, n)
	for i := range ids {
		r, err := st.CreateRun(ctx, "job", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	revs := make([]int64, n)
	spans := make([][2]time.Time, n)
	for i := range n {
		wg.Go(func() {
			<-start // a barrier: every claim starts together
			spans[i][0] = time.Now()
			_, err := st.ClaimRun(ctx, ids[i], fmt.Sprint("agent-", i))
			spans[i][1] = time.Now()
			if err != nil {
				t.Error(err)
				return
			}
			rec, err := d.Get(ctx, "ns", "r/"+ids[i], time.Time{})
			if err != nil {
				t.Error(err)
			}
			revs[i] = rec.Revision
		})
	}
	close(start)
	wg.Wait()
	if !pgtest.Overlapped(spans) {
		t.Fatal("no two claims overlapped: the race did not happen")
	}
	c, err := d.Get(ctx, "ns", "n/s/claimed", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Value) != fmt.Sprint(n) {
		t.Errorf("the counter of claimed runs holds %s after %d claims", c.Value, n)
	}
	if most := slices.Max(revs); c.Revision != most {
		t.Errorf("the counter's revision is %d, want the last claim's, %d", c.Revision, most)
	}
}
