package sqlitestate

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

// A batch's writes run without savepoints while none fails after writing;
// one that does is undone alone: the batch runs again, each write under a
// savepoint, and the others commit. A write refused by its own logic
// (errRejected) changes nothing and costs the others no second run.
func TestBatchUndoesOnlyTheWriteThatFailed(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "b.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	now := time.UnixMilli(1_700_000_000_000).UTC()
	boom := errors.New("boom")
	put := func(key string) func(*wtx) error {
		return func(w *wtx) error {
			_, err := w.apply("ns", &backend.Txn{
				Then:   []backend.Op{{Kind: backend.OpPut, Key: key, Value: []byte(`1`), Time: now}},
				Events: []backend.Event{{Key: key, Op: "kv.set", Value: []byte(`1`)}},
			}, now)
			return err
		}
	}
	for _, c := range []struct {
		name     string
		fails    func(*wtx) error
		wantErr  error
		wantRuns int
	}{
		{"rejected before writing", func(*wtx) error { return errRejected }, errRejected, 2},
		{"failed after writing", func(w *wtx) error {
			if err := put("bad")(w); err != nil {
				return err
			}
			return boom
		}, boom, 3}, // the first write, then both under savepoints
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := 0
			counted := func(f func(*wtx) error) func(*wtx) error {
				return func(w *wtx) error { runs++; return f(w) }
			}
			keys := []string{c.name + "/a", c.name + "/c"}
			var reqs []*writeReq
			for _, work := range []func(*wtx) error{counted(put(keys[0])), c.fails, counted(put(keys[1]))} {
				reqs = append(reqs, &writeReq{ctx: ctx, work: work, done: make(chan error, 1)})
			}
			if err := d.batch.runTx(reqs); err != nil {
				t.Fatal(err)
			}
			for i, want := range []error{nil, c.wantErr, nil} {
				if err := <-reqs[i].done; !errors.Is(err, want) {
					t.Errorf("write %d: %v, want %v", i, err, want)
				}
			}
			if runs != c.wantRuns {
				t.Errorf("the good writes ran %d times, want %d", runs, c.wantRuns)
			}
			for _, k := range keys {
				if _, err := d.Get(ctx, "ns", k, now); err != nil {
					t.Errorf("%s: %v", k, err)
				}
			}
			if _, err := d.Get(ctx, "ns", "bad", now); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("the failed write's record: %v, want not found", err)
			}
		})
	}
	// Event ids stay without gaps: the failed write's was not kept.
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: "ns", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4", len(evs))
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].ID != evs[i-1].ID-1 {
			t.Errorf("event ids %d then %d: a gap", evs[i-1].ID, evs[i].ID)
		}
	}
}
