package pgstate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestConformanceWithEveryKeyACounter runs the conformance suite with every
// key a counter (the prefix of counters empty): every add without TTL goes
// to a shard, every read and listing adds shards up, every other write
// folds them first. A counter must behave as any other record.
func TestConformanceWithEveryKeyACounter(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
		defer cancel()
		d := newTestDriver(t, ctx)
		d.counters = ""
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}

// TestConcurrentAddsReadExactly adds to one counter from many goroutines
// at once while others read it: the adds do not lose a unit, and a
// revision read is never seen again with another value (a reader waits for
// the adds in flight, so that no add with a lower revision commits after a
// read that saw a higher one; readers that do not wait fail this test in
// most runs).
func TestConcurrentAddsReadExactly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx, "pool_max_conns=16")
	const ns, key, adders, adds = "ns", "n/s/claimed", 8, 25
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]string{} // revision -> value read
	var spans [][2]time.Time
	for g := range adders {
		wg.Go(func() {
			<-start // a barrier: every adder and reader starts together
			for range adds {
				t0 := time.Now()
				_, err := d.Commit(ctx, &backend.Txn{NS: ns,
					Then:   []backend.Op{{Kind: backend.OpAdd, Key: key, Value: []byte("1")}},
					Events: []backend.Event{{Key: key, Op: "add", Writer: strconv.Itoa(g)}}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				spans = append(spans, [2]time.Time{t0, time.Now()})
				mu.Unlock()
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			<-start
			for range adds {
				r, err := d.Get(ctx, ns, key, time.Time{})
				if err == backend.ErrNotFound {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if v, ok := seen[r.Revision]; ok && v != string(r.Value) {
					t.Errorf("revision %d read as %s and as %s", r.Revision, v, r.Value)
				}
				seen[r.Revision] = string(r.Value)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if !pgtest.Overlapped(spans) {
		t.Fatal("no two adds overlapped: the race did not happen")
	}
	r, err := d.Get(ctx, ns, key, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(adders * adds); string(r.Value) != want {
		t.Errorf("the counter holds %s, want %s", r.Value, want)
	}
	var shards int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.q.s+`.counters WHERE ns = $1`, ns).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	if shards == 0 {
		t.Error("the adds wrote no shard")
	}
	t.Logf("%d shards", shards)
}

// TestExactWritesFoldShards writes a counter that has shards in every way
// that needs its exact value: a commit conditioned on it, an add with a
// TTL, a put, a delete, a Reset. Each sees the sum, and each leaves no
// shard behind that could be added again.
func TestExactWritesFoldShards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx, "pool_max_conns=4")
	const ns, key = "ns", "n/s/running"
	t0 := time.UnixMilli(1893456000000).UTC()
	add := func(delta string, ttl time.Duration) backend.Op {
		return backend.Op{Kind: backend.OpAdd, Key: key, Value: []byte(delta), Writer: "w" + delta, TTL: ttl, Time: t0}
	}
	commit := func(txn *backend.Txn) backend.Result {
		t.Helper()
		txn.NS, txn.Now = ns, t0
		res, err := d.Commit(ctx, txn)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	get := func() (backend.Record, int) {
		t.Helper()
		r, err := d.Get(ctx, ns, key, t0)
		if err != nil && err != backend.ErrNotFound {
			t.Fatal(err)
		}
		var shards int
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM `+d.q.s+`.counters WHERE ns = $1 AND key = $2`,
			ns, []byte(key)).Scan(&shards); err != nil {
			t.Fatal(err)
		}
		return r, shards
	}
	// Adds from several connections, so that several shards hold deltas.
	var wg sync.WaitGroup
	for _, delta := range []string{"1", "2", "3", "4"} {
		wg.Go(func() {
			if _, err := d.Commit(ctx, &backend.Txn{NS: ns, Now: t0, Then: []backend.Op{add(delta, 0)}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r, shards := get()
	if string(r.Value) != "10" || shards == 0 {
		t.Fatalf("after four adds: %s with %d shards, want 10 with some", r.Value, shards)
	}
	first := r.CreateRevision
	// A stale condition fails; the current one holds and the add folds.
	if res := commit(&backend.Txn{If: []backend.Cond{{Key: key, Revision: r.Revision - 1}}, Then: []backend.Op{add("5", 0)}}); res.Committed {
		t.Fatal("a commit conditioned on a stale revision of a counter committed")
	}
	res := commit(&backend.Txn{If: []backend.Cond{{Key: key, Revision: r.Revision}}, Then: []backend.Op{add("5", 0)}})
	r, shards = get()
	if !res.Committed || string(r.Value) != "15" || shards != 0 || r.Revision != res.Revision || r.CreateRevision != first || r.Writer != "w5" {
		t.Fatalf("after a conditioned add: committed %v, %+v with %d shards", res.Committed, r, shards)
	}
	// Shards again, then an add with a TTL (exact, folded).
	commit(&backend.Txn{Then: []backend.Op{add("1", 0)}})
	res = commit(&backend.Txn{Then: []backend.Op{add("1", time.Second)}})
	r, shards = get()
	if string(r.Value) != "17" || shards != 0 || r.ExpiresAt != t0.Add(time.Second) || r.Revision != res.Revision {
		t.Fatalf("after an add with a TTL: %+v with %d shards", r, shards)
	}
	// The next add without TTL clears the expiry, into a shard.
	commit(&backend.Txn{Then: []backend.Op{add("3", 0)}})
	r, shards = get()
	if string(r.Value) != "20" || shards != 1 || !r.ExpiresAt.IsZero() || r.CreateRevision != first {
		t.Fatalf("after an add clearing the TTL: %+v with %d shards", r, shards)
	}
	// A put replaces the sum; a delete removes the counter whole.
	commit(&backend.Txn{Then: []backend.Op{{Kind: backend.OpPut, Key: key, Value: []byte("7"), Time: t0}}})
	r, shards = get()
	if string(r.Value) != "7" || shards != 0 {
		t.Fatalf("after a put: %+v with %d shards", r, shards)
	}
	commit(&backend.Txn{Then: []backend.Op{add("2", 0)}})
	commit(&backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: key}}})
	if r, shards = get(); r.Revision != 0 || shards != 0 {
		t.Fatalf("after a delete: %+v with %d shards", r, shards)
	}
	res = commit(&backend.Txn{Then: []backend.Op{add("4", 0)}})
	if r, _ = get(); string(r.Value) != "4" || r.CreateRevision != res.Revision {
		t.Fatalf("an add after a delete: %+v, want a new counter of 4", r)
	}
	// A Reset removes shards too.
	if _, err := d.Reset(ctx, &backend.ResetQuery{NS: ns}); err != nil {
		t.Fatal(err)
	}
	if r, shards = get(); r.Revision != 0 || shards != 0 {
		t.Fatalf("after a reset: %+v with %d shards", r, shards)
	}
}

// TestAddersInFlightWriteShardsOfTheirOwn holds the shard that an adder's
// server process would pick first: the adder takes the next one rather
// than waiting for the holder's row.
func TestAddersInFlightWriteShardsOfTheirOwn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx, "pool_max_conns=1")
	const ns, key = "ns", "n/s/claimed"
	var pid int32
	if err := d.pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || ' shard ' || $2 || ' ' || encode($3, 'hex'), 0) # $4)`,
		d.schema, ns, []byte(key), int64(pid%32)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := d.Commit(ctx, &backend.Txn{NS: ns, Then: []backend.Op{{Kind: backend.OpAdd, Key: key, Value: []byte("1")}}}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := d.pool.Query(ctx, `SELECT shard FROM `+d.q.s+`.counters WHERE ns = $1 ORDER BY shard`, ns)
	if err != nil {
		t.Fatal(err)
	}
	shards, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	if want := (pid + 1) % 32; len(shards) != 1 || shards[0] != want {
		t.Errorf("the adder wrote shards %v, want [%d] (its process's, %d, being held)", shards, want, pid%32)
	}
}
