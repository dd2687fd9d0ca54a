package pgstate

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/pgtest"
)

// BenchmarkScale measures the store's operations on a small store and on
// large ones (records and as many history events, in the namespace used
// and in another one), to show that their cost does not grow with the
// store:
//
//	PGSTATE_SCALE=10000,1000000 go test -run '^$' -bench Scale -benchtime 2000x ./backend/pgstate/
//
// PGSTATE_SCALE lists the sizes, the first being the baseline (default
// 10000,100000). Each benchmark alternates ten rounds on the baseline store
// and on the large one, so that both see the same machine load, and reports
// the large store's ns/op, the baseline's (base-ns/op) and their ratio
// (x-base). It runs on a cluster of its own (initdb; see package pgtest)
// with shared_buffers=1GB, so that a million records fit in the database's
// cache as they would on a server configured for its data: on the default
// 128MB, a point read of a random key among a million waits for the
// operating system's page cache, which measures the server's memory, not
// the store. The store runs as in production: no injected clock.
func BenchmarkScale(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if s := os.Getenv("PGSTATE_SCALE"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1000 {
				b.Fatalf("PGSTATE_SCALE: %q is not a size of at least 1000", f)
			}
			sizes = append(sizes, n)
		}
	}
	if len(sizes) < 2 {
		b.Fatal("PGSTATE_SCALE needs a baseline size and at least one more")
	}
	ctx := context.Background()
	c := pgtest.Start(b, "shared_buffers=1GB")
	stores := make([]*scaleStore, len(sizes))
	for i, n := range sizes {
		stores[i] = newScaleStore(b, ctx, c, n)
	}
	ops := []struct {
		name string
		f    func(s *scaleStore, i int64) error
	}{
		{"Get", func(s *scaleStore, i int64) error { _, err := s.st.Get(ctx, s.key(i)); return err }},
		{"Set", func(s *scaleStore, i int64) error { _, err := s.st.Set(ctx, s.key(i), i); return err }},
		{"TryAcquire", func(s *scaleStore, i int64) error {
			_, err := s.st.TryAcquireLease(ctx, "res-"+strconv.FormatInt(s.next.Add(1), 10), "h", time.Minute)
			return err
		}},
		{"List100", func(s *scaleStore, i int64) error { // one prefix with 100 matches, first page
			_, err := s.st.List(ctx, s.key(i)[:6], state.WithLimit(100))
			return err
		}},
		{"ListLaterPage", func(s *scaleStore, i int64) error { // the same prefix's second page of 50
			p, err := s.st.List(ctx, s.key(i)[:6], state.WithLimit(50))
			if err == nil && p.NextCursor != "" {
				_, err = s.st.List(ctx, s.key(i)[:6], state.WithLimit(50), state.WithCursor(p.NextCursor))
			}
			return err
		}},
		{"History", func(s *scaleStore, i int64) error {
			_, err := s.st.History(ctx, state.HistoryQuery{Key: fmt.Sprintf("k/%08d", i%100), Limit: 10})
			return err
		}},
	}
	for _, large := range stores[1:] {
		base := stores[0]
		for _, op := range ops {
			b.Run(fmt.Sprintf("%s/records=%d", op.name, large.n), func(b *testing.B) {
				var baseT, largeT time.Duration
				const rounds = 10
				for r := range rounds {
					lo, hi := int64(b.N*r/rounds), int64(b.N*(r+1)/rounds)
					for _, s := range []*scaleStore{base, large} {
						start := time.Now()
						for i := lo; i < hi; i++ {
							if err := op.f(s, i); err != nil {
								b.Fatal(err)
							}
						}
						if s == base {
							baseT += time.Since(start)
						} else {
							largeT += time.Since(start)
						}
					}
				}
				b.ReportMetric(float64(largeT.Nanoseconds())/float64(b.N), "ns/op")
				b.ReportMetric(float64(baseT.Nanoseconds())/float64(b.N), "base-ns/op")
				b.ReportMetric(float64(largeT)/float64(baseT), "x-base")
			})
		}
	}
}

// scaleStore is a store of n records and n events in a schema of its own.
type scaleStore struct {
	n    int
	st   *state.Store
	next atomic.Int64
}

func newScaleStore(b *testing.B, ctx context.Context, c *pgtest.Cluster, n int) *scaleStore {
	b.Helper()
	d, err := Open(ctx, c.URL(), &Options{Schema: fmt.Sprintf("scale_%d", n)})
	if err != nil {
		b.Fatal(err)
	}
	const ns = "scale"
	start := time.Now()
	fill(b, ctx, d, ns, n)
	b.Logf("filled %d records and %d events (twice) in %v", n, n, time.Since(start))
	st, err := state.New(d, &state.Options{SweepInterval: -1, Namespace: ns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return &scaleStore{n: n, st: st}
}

// key returns the store key of a record of the fill (k/<8 digits>), spread
// over the whole store.
func (s *scaleStore) key(i int64) string { return fmt.Sprintf("%08d", 1+(i*7919)%int64(s.n)) }
