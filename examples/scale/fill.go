package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state"
)

// The mix of a store's records, in percent.
const (
	keyShare   = 70
	runShare   = 20
	leaseShare = 10
)

// pipelines and teams are the tag values runs are spread over: few enough
// pipelines that even the smallest store has a full page of claimable runs
// in each.
const (
	pipelines = 10
	teams     = 7
)

// filler grows a store, remembering how much of each kind it holds.
type filler struct {
	st      *state.Store
	workers int
	keys    int
	runs    int
	leases  int
}

func keyName(i int) string         { return fmt.Sprintf("user/%08d/%02d", i/100, i%100) }
func groupPrefix(g int) string     { return fmt.Sprintf("user/%08d/", g) }
func pipelineTag(i int) string     { return fmt.Sprintf("p%02d", i%pipelines) }
func leaseName(i int) string       { return fmt.Sprintf("lease/%08d", i) }
func workerName(i int) string      { return fmt.Sprintf("worker-%d", i%32) }
func valueOf(i int) map[string]any { return map[string]any{"n": i, "note": "some agent state"} }

// fillTo adds records until the store holds n in the mix above.
func (f *filler) fillTo(ctx context.Context, n int) error {
	if err := f.fillKeys(ctx, n*keyShare/100); err != nil {
		return err
	}
	if err := f.fillRuns(ctx, n*runShare/100); err != nil {
		return err
	}
	return f.fillLeases(ctx, n*leaseShare/100)
}

// fillKeys writes keys in batches of a thousand (one atomic write each).
func (f *filler) fillKeys(ctx context.Context, to int) error {
	from := f.keys
	err := parallel(ctx, f.workers, (to-from+999)/1000, func(b int) error {
		lo := from + b*1000
		items := make([]state.Item, 0, 1000)
		for i := lo; i < min(lo+1000, to); i++ {
			items = append(items, state.Item{Key: keyName(i), Value: valueOf(i)})
		}
		_, err := f.st.SetMany(ctx, items)
		return err
	})
	if err == nil {
		f.keys = to
	}
	return err
}

// fillRuns creates runs: a tenth stay created, a tenth run under a live
// claim, the rest are done.
func (f *filler) fillRuns(ctx context.Context, to int) error {
	from := f.runs
	err := parallel(ctx, f.workers, to-from, func(k int) error {
		i := from + k
		// Blocks of ten consecutive runs share a pipeline, so that each
		// pipeline has runs in every status.
		r, err := f.st.CreateRun(ctx, "job", map[string]string{"pipeline": pipelineTag(i / 10), "team": fmt.Sprintf("t%d", i%teams)})
		if err != nil {
			return err
		}
		switch i % 10 {
		case 0:
			return nil
		case 1:
			c, err := f.st.ClaimRun(ctx, r.ID, workerName(i), state.WithClaimTTL(24*time.Hour))
			if err != nil {
				return err
			}
			_, err = f.st.CheckpointRun(ctx, r.ID, 1, valueOf(i), state.WithFence(c.Fence))
			return err
		}
		_, err = f.st.CompleteRun(ctx, r.ID)
		return err
	})
	if err == nil {
		f.runs = to
	}
	return err
}

// fillLeases acquires leases on distinct resources.
func (f *filler) fillLeases(ctx context.Context, to int) error {
	from := f.leases
	err := parallel(ctx, f.workers, to-from, func(k int) error {
		i := from + k
		_, err := f.st.TryAcquireLease(ctx, leaseName(i), workerName(i), 24*time.Hour)
		return err
	})
	if err == nil {
		f.leases = to
	}
	return err
}

// parallel calls fn(0..n-1) on up to workers goroutines and returns the
// first error.
func parallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := ctx.Err(); err != nil {
					once.Do(func() { first = err })
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
