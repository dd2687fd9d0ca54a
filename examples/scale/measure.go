package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/statesidecar/state"
)

// result is the latency of one operation at one size.
type result struct {
	op       string
	p50, p99 time.Duration
}

// operation is one measured operation: prepare runs untimed before the
// calls (it may return state for call), call is timed once per iteration.
type operation struct {
	name    string
	prepare func(ctx context.Context, n int) (any, error)
	call    func(ctx context.Context, i int, prep any) error
}

// operations returns the measured operations of st, the store f filled
// (through a store of its own on PostgreSQL, see openTarget); their
// untimed preparations write through f. Every input a call needs (a key,
// a value, a group, a resource name) is made by its prepare, untimed, so
// that the timings hold the store's work and not the formatting of its
// arguments; random inputs are drawn uniformly over the whole store at
// every size.
func (f *filler) operations(st *state.Store, size, ops int) []operation {
	rng := rand.New(rand.NewPCG(uint64(size), 42))
	keys := drawNames(rng, f.keys, keyName)
	groups := drawNames(rng, f.keys/100, groupPrefix)
	page := func(ctx context.Context, p state.RunPage, err error) error {
		if err == nil && len(p.Runs) == 0 {
			return fmt.Errorf("discovery found no run")
		}
		return err
	}
	return []operation{
		{name: "Get", prepare: keys, call: func(ctx context.Context, i int, prep any) error {
			_, err := st.Get(ctx, prep.([]string)[i])
			return err
		}},
		{name: "Set", prepare: func(ctx context.Context, n int) (any, error) {
			k, _ := keys(ctx, n)
			out := make([]state.Item, n)
			for i, key := range k.([]string) {
				out[i] = state.Item{Key: key, Value: valueOf(i)}
			}
			return out, nil
		}, call: func(ctx context.Context, i int, prep any) error {
			it := prep.([]state.Item)[i]
			_, err := st.Set(ctx, it.Key, it.Value)
			return err
		}},
		{name: "ClaimRun (fresh)", prepare: func(ctx context.Context, n int) (any, error) {
			ids := make([]string, n)
			err := parallel(ctx, f.workers, n, func(i int) error {
				r, err := f.st.CreateRun(ctx, "claim-me", map[string]string{"pool": fmt.Sprint(size)})
				ids[i] = r.ID
				return err
			})
			return ids, err
		}, call: func(ctx context.Context, i int, ids any) error {
			_, err := st.ClaimRun(ctx, ids.([]string)[i], "bench")
			return err
		}},
		{name: "TryAcquire (new)", prepare: func(_ context.Context, n int) (any, error) {
			out := make([]string, n)
			for i := range out {
				out[i] = fmt.Sprintf("bench/%d/%d", size, i)
			}
			return out, nil
		}, call: func(ctx context.Context, i int, prep any) error {
			_, err := st.TryAcquireLease(ctx, prep.([]string)[i], "bench", time.Hour)
			return err
		}},
		{name: "Discover tags+claimable", prepare: func(_ context.Context, n int) (any, error) {
			out := make([]state.RunQuery, n)
			for i := range out {
				pipeline := pipelineTag(rng.IntN(min(pipelines, f.runs/10))) // one that has runs
				out[i] = state.RunQuery{Tags: map[string]string{"pipeline": pipeline}, Claimable: true, Limit: 10}
			}
			return out, nil
		}, call: func(ctx context.Context, i int, prep any) error {
			p, err := st.DiscoverRuns(ctx, prep.([]state.RunQuery)[i])
			return page(ctx, p, err)
		}},
		{name: "Discover status=running", call: func(ctx context.Context, _ int, _ any) error {
			p, err := st.DiscoverRuns(ctx, state.RunQuery{Status: state.StatusRunning, Limit: 10})
			return page(ctx, p, err)
		}},
		{name: "Discover status=done", call: func(ctx context.Context, _ int, _ any) error {
			p, err := st.DiscoverRuns(ctx, state.RunQuery{Status: state.StatusDone, Limit: 10})
			return page(ctx, p, err)
		}},
		{name: "List first page", prepare: groups, call: func(ctx context.Context, i int, prep any) error {
			p, err := st.List(ctx, prep.([]string)[i], state.WithLimit(20))
			if err == nil && len(p.Keys) != 20 {
				err = fmt.Errorf("listed %d keys, want 20", len(p.Keys))
			}
			return err
		}},
		{name: "List later page", prepare: func(ctx context.Context, n int) (any, error) {
			g, _ := groups(ctx, n)
			out := make([]listAt, n)
			for i, prefix := range g.([]string) {
				p, err := st.List(ctx, prefix, state.WithLimit(60))
				if err != nil {
					return nil, err
				}
				out[i] = listAt{prefix, p.NextCursor}
			}
			return out, nil
		}, call: func(ctx context.Context, i int, prep any) error {
			a := prep.([]listAt)[i]
			p, err := st.List(ctx, a.prefix, state.WithLimit(20), state.WithCursor(a.cursor))
			if err == nil && len(p.Keys) != 20 {
				err = fmt.Errorf("listed %d keys after the cursor, want 20", len(p.Keys))
			}
			return err
		}},
		{name: "History key", prepare: keys, call: func(ctx context.Context, i int, prep any) error {
			_, err := st.History(ctx, state.HistoryQuery{Key: prep.([]string)[i], Limit: 10})
			return err
		}},
		{name: "History all", call: func(ctx context.Context, _ int, _ any) error {
			_, err := st.History(ctx, state.HistoryQuery{Limit: 10})
			return err
		}},
	}
}

// measureProfiled is measure, writing a CPU profile of it to path (the
// size is added to the name) when path is set.
func measureProfiled(ctx context.Context, f *filler, st *state.Store, size, ops int, path string) ([]result, error) {
	if path == "" {
		return measure(ctx, f, st, size, ops)
	}
	out, err := os.Create(fmt.Sprintf("%s.%d", path, size))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		return nil, err
	}
	defer pprof.StopCPUProfile()
	return measure(ctx, f, st, size, ops)
}

// listAt is a listing position: a prefix and a cursor into it.
type listAt struct{ prefix, cursor string }

// rounds is how many turns the operations take: each round times a share
// of every operation's calls, so that a burst of load from elsewhere on the
// machine spreads over all of them instead of spoiling one.
const rounds = 4

// pauseCollector readies the heap for timing and turns the collector off
// until the returned function is called, so that no size is timed during
// collections or page faults that another size escapes. With the collector
// on, a store of ten thousand records made it run some thirty times during
// its timed calls and one of a million none (the cost of collecting per
// byte allocated is the same at every size, but a short run at a large size
// never meets it); with it off, the calls' allocations take fresh memory,
// and the first touch of each page faults, which a small heap did some
// 80,000 times and a large one, with room freed by collections while it
// grew, a few thousand. So it touches reserve bytes of heap first, frees
// them and collects: the timed calls then allocate memory the process
// already holds at every size. A soft memory limit of the live heap plus
// twice the reserve still lets the collector run should the calls allocate
// more than that.
func pauseCollector(reserve int) (resume func()) {
	reserve = max(reserve, 64<<20)
	pct := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(-1)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	debug.SetMemoryLimit(min(limit, int64(ms.HeapAlloc)+2*int64(reserve)))
	held := make([][]byte, 0, reserve>>20)
	for range reserve >> 20 {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	runtime.KeepAlive(held)
	held = nil
	runtime.GC()
	return func() {
		debug.SetGCPercent(pct)
		debug.SetMemoryLimit(limit)
	}
}

// measure times ops calls of every operation of st, one at a time, after a
// few untimed ones to warm up, in rounds, with the collector paused.
func measure(ctx context.Context, f *filler, st *state.Store, size, ops int) ([]result, error) {
	return timeOps(ctx, f.operations(st, size, ops), ops)
}

// timeOps times ops calls of every operation of list, as measure does.
func timeOps(ctx context.Context, list []operation, ops int) ([]result, error) {
	// Before preparing, so that what warming up touched is still warm. The
	// memory store's calls allocate some 14 KB each on average.
	defer pauseCollector(len(list) * (ops + ops/10) * 32 << 10)()
	warm := ops / 10
	preps := make([]any, len(list))
	took := make([][]time.Duration, len(list))
	next := make([]int, len(list)) // each operation's next call index
	for i, op := range list {
		if op.prepare != nil {
			var err error
			if preps[i], err = op.prepare(ctx, ops+warm); err != nil {
				return nil, fmt.Errorf("%s: preparing: %w", op.name, err)
			}
		}
		for ; next[i] < warm; next[i]++ {
			if err := op.call(ctx, next[i], preps[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", op.name, err)
			}
		}
	}
	for r := range rounds {
		for i, op := range list {
			end := warm + ops*(r+1)/rounds
			for ; next[i] < end; next[i]++ {
				start := time.Now()
				if err := op.call(ctx, next[i], preps[i]); err != nil {
					return nil, fmt.Errorf("%s: %w", op.name, err)
				}
				took[i] = append(took[i], time.Since(start))
			}
		}
	}
	out := make([]result, len(list))
	for i, op := range list {
		t := took[i]
		slices.Sort(t)
		out[i] = result{op: op.name, p50: t[len(t)/2], p99: t[len(t)*99/100]}
	}
	return out, nil
}

// drawNames returns an input maker for timed calls: n names, each name(i)
// of an i drawn uniformly below limit with rng.
func drawNames(rng *rand.Rand, limit int, name func(int) string) func(context.Context, int) (any, error) {
	return func(_ context.Context, n int) (any, error) {
		out := make([]string, n)
		for i := range out {
			out[i] = name(rng.IntN(limit))
		}
		return out, nil
	}
}
