package pgstate

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/pgtest"
)

// inFlight starts a Set of key in ns in a transaction of its own and
// leaves it open: its revision is drawn and its event written, but not
// committed. It returns the revision and the transaction.
func inFlight(t *testing.T, ctx context.Context, d *Driver, ns, key string) (int64, pgx.Tx) {
	t.Helper()
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var committed bool
	var rev, cur, now int64
	err = tx.QueryRow(ctx, d.q.set, ns, nil, d.nsLock(ns), d.lockKey(ns, key), []byte(key), []byte("v"), "w",
		int64(0), int64(0), nil, []byte(key), "put").Scan(&committed, &rev, &cur, &now)
	if err != nil || !committed {
		t.Fatalf("set in flight: committed %v, %v", committed, err)
	}
	return rev, tx
}

// ids returns the ids of ns's history, oldest first.
func ids(t *testing.T, ctx context.Context, d *Driver, ns string) []int64 {
	t.Helper()
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, e := range slices.Backward(evs) {
		out = append(out, e.ID)
	}
	return out
}

// TestHistoryStopsAtAnEventInFlight checks the settled horizon: while a
// write holds an event id uncommitted, history shows no later event, even
// a committed one, so that a reader following it with a cursor cannot pass
// the earlier one; once the write commits or rolls back, both show.
func TestHistoryStopsAtAnEventInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	set := func(ns, key string) int64 {
		t.Helper()
		res, err := d.Commit(ctx, &backend.Txn{NS: ns, Then: []backend.Op{{Kind: backend.OpPut, Key: key, Value: []byte("v")}},
			Events: []backend.Event{{Key: key, Op: "put"}}})
		if err != nil || !res.Committed {
			t.Fatalf("set %s: %v %v", key, res, err)
		}
		return res.Revision
	}
	for _, end := range []string{"commit", "rollback"} {
		t.Run(end, func(t *testing.T) {
			ns := "ns-" + end
			first := set(ns, "first")
			early, tx := inFlight(t, ctx, d, ns, "early")
			late := set(ns, "late")
			other := set("other-"+end, "x") // another namespace's history is not held back
			if got := ids(t, ctx, d, "other-"+end); !slices.Equal(got, []int64{other}) {
				t.Errorf("another namespace's history: %v, want [%d]", got, other)
			}
			if !(first < early && early < late) {
				t.Fatalf("revisions %d, %d, %d do not increase", first, early, late)
			}
			if got := ids(t, ctx, d, ns); !slices.Equal(got, []int64{first}) {
				t.Fatalf("with %d in flight, history shows %v, want [%d]", early, got, first)
			}
			want := []int64{first, early, late}
			if end == "commit" {
				if err := tx.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
				want = []int64{first, late}
			}
			if got := ids(t, ctx, d, ns); !slices.Equal(got, want) {
				t.Fatalf("after %s, history shows %v, want %v", end, got, want)
			}
		})
	}
}

// TestWatchDeliversAnEventThatCommitsLate watches while an earlier event is
// in flight and a later one commits: Watch yields both, in order, once the
// earlier commits.
func TestWatchDeliversAnEventThatCommitsLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d, st := newWatchedStore(t, ctx)
	// The namespace exists before the write in flight, which would
	// otherwise hold its creation.
	first, err := st.Set(ctx, "first", "v")
	if err != nil {
		t.Fatal(err)
	}
	got := watch(t, ctx, st, state.WatchQuery{After: first.Version})
	early, tx := inFlight(t, ctx, d, "ns", "early")
	late, err := st.Set(ctx, "late", "v")
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		key string
		id  int64
	}{{"early", early}, {"late", late.Version}} {
		select {
		case e := <-got:
			if e.Key != want.key || e.ID != want.id {
				t.Fatalf("Watch yielded %s #%d, want %s #%d", e.Key, e.ID, want.key, want.id)
			}
		case <-ctx.Done():
			t.Fatalf("Watch did not yield %s #%d", want.key, want.id)
		}
	}
}

// TestWatchRacingWriters watches while writers race: Watch yields every
// event exactly once, in id order, whatever order the writes commit in.
func TestWatchRacingWriters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d, st := newWatchedStore(t, ctx)
	const writers, each = 6, 40
	got := watch(t, ctx, st, state.WatchQuery{})
	// The writers start behind a barrier; in counts the writes in flight,
	// so that the test knows they overlapped.
	var ready, start sync.WaitGroup
	var in, overlapped atomic.Int64
	ready.Add(writers)
	start.Add(1)
	var writes sync.WaitGroup
	for w := range writers {
		writes.Go(func() {
			ready.Done()
			start.Wait()
			for i := range each {
				if in.Add(1) > 1 {
					overlapped.Add(1)
				}
				_, err := st.Set(ctx, fmt.Sprintf("k%d/%d", w, i), i)
				in.Add(-1)
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	ready.Wait()
	start.Done()
	writes.Wait()
	if overlapped.Load() < writers*each/4 {
		t.Errorf("only %d of %d writes overlapped another", overlapped.Load(), writers*each)
	}
	var seen []int64
	for len(seen) < writers*each {
		select {
		case e := <-got:
			id := e.ID
			if len(seen) > 0 && id <= seen[len(seen)-1] {
				t.Fatalf("Watch yielded #%d after #%d", id, seen[len(seen)-1])
			}
			seen = append(seen, id)
		case <-ctx.Done():
			t.Fatalf("Watch yielded %d of %d events", len(seen), writers*each)
		}
	}
	if all := ids(t, ctx, d, "ns"); !slices.Equal(all, seen) {
		t.Fatalf("Watch yielded %v, history holds %v", seen, all)
	}
}

// newWatchedStore is a store over a driver of its own, in namespace ns,
// that waits by polling every 20 ms where no notification comes.
func newWatchedStore(t *testing.T, ctx context.Context) (*Driver, *state.Store) {
	t.Helper()
	d := newTestDriver(t, ctx)
	st, err := state.New(d, &state.Options{SweepInterval: -1, Namespace: "ns", WaitPollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return d, st
}

// watch follows st's history from q until the test ends and hands on
// every event it yields.
func watch(t *testing.T, ctx context.Context, st *state.Store, q state.WatchQuery) <-chan state.Event {
	got := make(chan state.Event, 1024)
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for e, err := range st.Watch(wctx, q) {
			if err != nil {
				return
			}
			select {
			case got <- e:
			case <-wctx.Done():
				return
			}
		}
	})
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	return got
}
