package main

import (
	"context"
	"slices"
	"sync"
	"syscall"
	"time"
)

// A caller makes one call of the workload: worker w's n-th call.
type caller func(ctx context.Context, w, n int) error

// result is what one measurement found.
type result struct {
	calls    int
	errors   int
	elapsed  time.Duration
	p50, p99 time.Duration
	firstErr error
	// cpu is the process's CPU time (user and system) over the measured
	// calls: client and in-process server together, or the client alone
	// when the server runs in a process of its own.
	cpu time.Duration
	// srv is that server process's CPU time over the measured calls (0
	// for an in-process server).
	srv time.Duration
}

// srvPerCall is the server process's CPU time per call.
func (r result) srvPerCall() time.Duration {
	if r.calls == 0 {
		return 0
	}
	return r.srv / time.Duration(r.calls)
}

// cpuPerCall is the CPU time per call: unlike calls/s, it hardly moves
// with the load other processes put on the machine.
func (r result) cpuPerCall() time.Duration {
	if r.calls == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.calls)
}

// perSecond is the throughput.
func (r result) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.calls) / r.elapsed.Seconds()
}

// measure runs workers goroutines, each calling call in a loop, first for
// warmup (not counted) and then for d, and returns the throughput and the
// latency percentiles of the calls made during d, and the CPU time spent
// meanwhile by this process and, if srvCPU is not nil, by the server
// process it reads.
func measure(ctx context.Context, workers int, warmup, d time.Duration, call caller, srvCPU func() time.Duration) result {
	type worker struct {
		lat    []time.Duration
		errors int
		err    error
	}
	ws := make([]worker, workers)
	var wg sync.WaitGroup
	begin := time.Now()
	startAt, stopAt := begin.Add(warmup), begin.Add(warmup+d)
	if srvCPU == nil {
		srvCPU = func() time.Duration { return 0 }
	}
	cpu0 := make(chan [2]time.Duration, 1)
	time.AfterFunc(warmup, func() { cpu0 <- [2]time.Duration{cpuTime(), srvCPU()} })
	for i := range ws {
		wg.Go(func() {
			w := &ws[i]
			w.lat = make([]time.Duration, 0, 1024)
			for n := 0; ctx.Err() == nil; n++ {
				t0 := time.Now()
				if t0.After(stopAt) {
					return
				}
				err := call(ctx, i, n)
				if t0.Before(startAt) {
					continue
				}
				w.lat = append(w.lat, time.Since(t0))
				if err != nil {
					w.errors++
					if w.err == nil {
						w.err = err
					}
				}
			}
		})
	}
	wg.Wait()
	var r result
	r.elapsed = time.Since(startAt)
	c0 := <-cpu0
	r.cpu, r.srv = cpuTime()-c0[0], srvCPU()-c0[1]
	var all []time.Duration
	for _, w := range ws {
		all = append(all, w.lat...)
		r.errors += w.errors
		if r.firstErr == nil {
			r.firstErr = w.err
		}
	}
	r.calls = len(all)
	slices.Sort(all)
	r.p50, r.p99 = percentile(all, 0.50), percentile(all, 0.99)
	return r
}

// percentile returns the q-th quantile of sorted (nearest rank).
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
