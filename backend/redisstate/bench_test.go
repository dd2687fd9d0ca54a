package redisstate_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/benchvs"
	"github.com/statesidecar/state/internal/redistest"
)

// BenchmarkVsRaw measures the store's fast operations against raw go-redis
// GET or SET on the same server and client, at 1 and 32 goroutines:
//
//	STATE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test -run '^$' -bench VsRaw ./backend/redisstate/
//
// Each benchmark alternates ten rounds of raw commands and store operations
// (b.N of each in all), so that both see the same machine load, and reports
// the store's ns/op, the raw command's (raw-ns/op) and the store's
// throughput as a fraction of raw (x-raw), then the CPU time per operation
// of this process and, when Redis runs on this machine, of the Redis server
// (cpu-ns/op and srv-ns/op, with their raw-* twins): steadier than wall time
// on a loaded machine. The store runs as in production: no injected clock,
// so every script reads Redis's clock.
func BenchmarkVsRaw(b *testing.B) {
	u := redistest.URL(b)
	for _, g := range []int{1, 32} {
		for _, bm := range []struct{ name, raw string }{
			{"Get", "GET"},
			{"Set", "SET"},
			{"Claim", "SET"},
			{"Heartbeat", "SET"},
			{"Acquire", "SET"},
		} {
			b.Run(bm.name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				e := newBenchEnv(b, u)
				store := benchvs.StoreOp(b, e.st, bm.name)
				benchvs.VsRaw(b, g, e.rawOp(b, bm.raw), store, e.servers(b))
			})
		}
	}
}

// benchEnv is a store over a client of its own, with a pool large enough
// for 32 goroutines, in a prefix of its own deleted afterwards.
type benchEnv struct {
	d  *redisstate.Driver
	st *state.Store
}

func newBenchEnv(b *testing.B, u string) *benchEnv {
	b.Helper()
	d, err := redisstate.Open(ctx, withParams(u, "prefix="+redistest.Prefix(), "pool_size=64"))
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{d: d, st: st}
	b.Cleanup(func() {
		if err := redistest.PurgeScan(context.Background(), d.Client(), d.Prefix()); err != nil { // raw keys too
			b.Error(err)
		}
		_ = e.st.Close()
	})
	return e
}

// rawOp returns a raw go-redis GET or SET of a small JSON value, on keys of
// the benchmark's prefix.
func (e *benchEnv) rawOp(b *testing.B, cmd string) func(int64) error {
	rdb, base := e.d.Client(), "{"+e.d.Prefix()+"}:raw:"
	if cmd == "GET" {
		if err := rdb.Set(ctx, base+"k", `{"n":1}`, 0).Err(); err != nil {
			b.Fatal(err)
		}
		return func(int64) error { return rdb.Get(ctx, base+"k").Err() }
	}
	return func(i int64) error { return rdb.Set(ctx, base+strconv.FormatInt(i%1000, 10), `{"n":1}`, 0).Err() }
}

// servers returns the Redis server's process id, when it runs on this
// machine, for benchvs to count its CPU time; nil otherwise.
func (e *benchEnv) servers(b *testing.B) func() []int {
	info, err := e.d.Client().Info(ctx, "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if pid, err := strconv.Atoi(v); err == nil && benchvs.LocalProcess(pid, "redis-server") {
				return func() []int { return []int{pid} }
			}
		}
	}
	return nil
}
