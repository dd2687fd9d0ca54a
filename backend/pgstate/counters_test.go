package pgstate

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

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
// read that saw a higher one).
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
			for i := range adds {
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
				_ = i
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
	overlap := false
	for i := range spans {
		for j := range i {
			overlap = overlap || (spans[i][0].Before(spans[j][1]) && spans[j][0].Before(spans[i][1]))
		}
	}
	if !overlap {
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
