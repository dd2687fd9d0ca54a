package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
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

// operations returns the measured operations over the filled store.
func (f *filler) operations(size, ops int) []operation {
	st := f.st
	rng := rand.New(rand.NewPCG(uint64(size), 42))
	anyKey := func() string { return keyName(rng.IntN(f.keys)) }
	anyGroup := func() string { return groupPrefix(rng.IntN(f.keys / 100)) }
	page := func(ctx context.Context, p state.RunPage, err error) error {
		if err == nil && len(p.Runs) == 0 {
			return fmt.Errorf("discovery found no run")
		}
		return err
	}
	return []operation{
		{name: "Get", call: func(ctx context.Context, _ int, _ any) error {
			_, err := st.Get(ctx, anyKey())
			return err
		}},
		{name: "Set", call: func(ctx context.Context, i int, _ any) error {
			_, err := st.Set(ctx, anyKey(), valueOf(i))
			return err
		}},
		{name: "ClaimRun (fresh)", prepare: func(ctx context.Context, n int) (any, error) {
			ids := make([]string, n)
			err := parallel(ctx, f.workers, n, func(i int) error {
				r, err := st.CreateRun(ctx, "claim-me", map[string]string{"pool": fmt.Sprint(size)})
				ids[i] = r.ID
				return err
			})
			return ids, err
		}, call: func(ctx context.Context, i int, ids any) error {
			_, err := st.ClaimRun(ctx, ids.([]string)[i], "bench")
			return err
		}},
		{name: "TryAcquire (new)", call: func(ctx context.Context, i int, _ any) error {
			_, err := st.TryAcquire(ctx, fmt.Sprintf("bench/%d/%d", size, i), "bench", time.Hour)
			return err
		}},
		{name: "Discover tags+claimable", call: func(ctx context.Context, _ int, _ any) error {
			pipeline := pipelineTag(rng.IntN(min(pipelines, f.runs/10))) // one that has runs
			p, err := st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"pipeline": pipeline},
				Claimable: true, Limit: 10})
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
		{name: "List first page", call: func(ctx context.Context, _ int, _ any) error {
			p, err := st.List(ctx, anyGroup(), state.WithLimit(20))
			if err == nil && len(p.Keys) != 20 {
				err = fmt.Errorf("listed %d keys, want 20", len(p.Keys))
			}
			return err
		}},
		{name: "List later page", prepare: func(ctx context.Context, n int) (any, error) {
			out := make([]listAt, n)
			for i := range out {
				prefix := anyGroup()
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
		{name: "History key", call: func(ctx context.Context, _ int, _ any) error {
			_, err := st.History(ctx, state.HistoryQuery{Key: anyKey(), Limit: 10})
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
func measureProfiled(ctx context.Context, f *filler, size, ops int, path string) ([]result, error) {
	if path == "" {
		return measure(ctx, f, size, ops)
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
	return measure(ctx, f, size, ops)
}

// listAt is a listing position: a prefix and a cursor into it.
type listAt struct{ prefix, cursor string }

// rounds is how many turns the operations take: each round times a share
// of every operation's calls, so that a burst of load from elsewhere on the
// machine spreads over all of them instead of spoiling one.
const rounds = 4

// measure times ops calls of every operation, one at a time, after a few
// untimed ones to warm up, in rounds.
func measure(ctx context.Context, f *filler, size, ops int) ([]result, error) {
	list := f.operations(size, ops)
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
