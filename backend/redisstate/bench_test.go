package redisstate_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
)

// BenchmarkRedis measures the store's fast operations beside raw go-redis
// GET and SET on the same server and client, at 1 and 32 goroutines:
//
//	STATE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench . ./backend/redisstate/
//
// The store runs as in production: no injected clock, so every script reads
// Redis's clock. GetInjectedClock is Get with a clock given by the caller
// (one HMGET instead of a script).
func BenchmarkRedis(b *testing.B) {
	u := redistest.URL(b)
	for _, g := range []int{1, 32} {
		for _, bm := range []struct {
			name string
			fn   func(b *testing.B, e *benchEnv) func(i int64)
		}{
			{"RawGET", func(b *testing.B, e *benchEnv) func(int64) {
				key := "{" + e.d.Prefix() + "}:raw"
				if err := e.d.Client().Set(ctx, key, `{"n":1}`, 0).Err(); err != nil {
					b.Fatal(err)
				}
				return func(int64) { e.check(e.d.Client().Get(ctx, key).Err()) }
			}},
			{"RawSET", func(b *testing.B, e *benchEnv) func(int64) {
				base := "{" + e.d.Prefix() + "}:raw:"
				return func(i int64) { e.check(e.d.Client().Set(ctx, base+strconv.FormatInt(i%1000, 10), `{"n":1}`, 0).Err()) }
			}},
			{"Get", func(b *testing.B, e *benchEnv) func(int64) {
				if _, err := e.st.Set(ctx, "k", map[string]int{"n": 1}); err != nil {
					b.Fatal(err)
				}
				return func(int64) { _, err := e.st.Get(ctx, "k"); e.check(err) }
			}},
			{"GetInjectedClock", func(b *testing.B, e *benchEnv) func(int64) {
				st := state.New(e.d, &state.Options{SweepInterval: -1, Clock: state.ClockFunc(time.Now)})
				if _, err := st.Set(ctx, "k", map[string]int{"n": 1}); err != nil {
					b.Fatal(err)
				}
				return func(int64) { _, err := st.Get(ctx, "k"); e.check(err) }
			}},
			{"Set", func(b *testing.B, e *benchEnv) func(int64) {
				return func(i int64) {
					_, err := e.st.Set(ctx, "k"+strconv.FormatInt(i%1000, 10), map[string]int{"n": 1})
					e.check(err)
				}
			}},
			{"Claim", func(b *testing.B, e *benchEnv) func(int64) {
				ids := e.createRuns(b, b.N)
				return func(i int64) { _, err := e.st.ClaimRun(ctx, ids[i], "agent"); e.check(err) }
			}},
			{"Acquire", func(b *testing.B, e *benchEnv) func(int64) {
				return func(i int64) {
					_, err := e.st.TryAcquire(ctx, "res-"+strconv.FormatInt(i, 10), "holder", time.Minute)
					e.check(err)
				}
			}},
		} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", bm.name, g), func(b *testing.B) {
				e := newBenchEnv(b, u)
				op := bm.fn(b, e)
				var next atomic.Int64
				b.ReportAllocs()
				b.ResetTimer()
				if g == 1 {
					for i := range b.N {
						op(int64(i))
					}
					return
				}
				b.SetParallelism((g + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						op(next.Add(1) - 1)
					}
				})
			})
		}
	}
}

// benchEnv is a store over a client of its own, with a pool large enough
// for 32 goroutines, in a prefix of its own deleted afterwards.
type benchEnv struct {
	d   *redisstate.Driver
	st  *state.Store
	err atomic.Value
}

func newBenchEnv(b *testing.B, u string) *benchEnv {
	b.Helper()
	d, err := redisstate.Open(ctx, withParams(u, "prefix="+redistest.Prefix(), "pool_size=64"))
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{d: d, st: state.New(d, &state.Options{SweepInterval: -1})}
	b.Cleanup(func() {
		if err, _ := e.err.Load().(error); err != nil {
			b.Error(err)
		}
		if err := redistest.Purge(context.Background(), d.Client(), d.Prefix()); err != nil {
			b.Error(err)
		}
		_ = e.st.Close()
	})
	return e
}

// check records the first error of an operation; the benchmark fails at
// its end.
func (e *benchEnv) check(err error) {
	if err != nil {
		e.err.CompareAndSwap(nil, err)
	}
}

// createRuns creates n runs to claim, 32 at a time.
func (e *benchEnv) createRuns(b *testing.B, n int) []string {
	b.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 32 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				r, err := e.st.CreateRun(ctx, "job", nil)
				if err != nil {
					e.check(err)
					return
				}
				ids[i] = r.ID
			}
		})
	}
	wg.Wait()
	if err, _ := e.err.Load().(error); err != nil {
		b.Fatal(err)
	}
	return ids
}
