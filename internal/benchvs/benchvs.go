// Package benchvs times a store's operations beside the same work done with
// the raw engine, in alternating rounds, so that both see the same machine
// load: the backends' "VsRaw" benchmarks use it.
package benchvs

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Rounds is how many alternating rounds Alternate runs.
const Rounds = 10

// Alternate performs b.N operations of first and b.N of second with g
// goroutines each, in Rounds alternating rounds (first, second, first...),
// and returns the time each took in all. Operations are numbered from 0 to
// b.N-1 per function. It fails b with the first error of either.
func Alternate(b *testing.B, g int, first, second func(int64) error) (firstT, secondT time.Duration) {
	b.Helper()
	f, s := Measure(b, g, first, second, nil)
	return f.Wall, s.Wall
}

// Measure is Alternate, and also counts the CPU time each side used, in
// this process and, when servers is not nil, in the server processes
// whose ids it returns (it is called before and after each round, outside
// the timed part).
func Measure(b *testing.B, g int, first, second func(int64) error, servers func() []int) (firstT, secondT Times) {
	b.Helper()
	b.ResetTimer()
	var next, firstNext atomic.Int64
	var failed atomic.Value
	round := func(t *Times, next *atomic.Int64, n int64, op func(int64) error) {
		b.StopTimer()
		m := markCPU(servers)
		b.StartTimer()
		t.Wall += Parallel(g, n, next, op, &failed)
		b.StopTimer()
		m.since(t, servers)
		b.StartTimer()
	}
	for r := range Rounds {
		n := int64(b.N*(r+1)/Rounds - b.N*r/Rounds)
		round(&firstT, &firstNext, n, first)
		round(&secondT, &next, n, second)
	}
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return firstT, secondT
}

// Parallel performs n operations with g goroutines, numbering them from
// next, and returns how long they took; the first error goes to failed and
// stops the goroutine that met it.
func Parallel(g int, n int64, next *atomic.Int64, op func(int64) error, failed *atomic.Value) time.Duration {
	end := next.Load() + n
	start := time.Now()
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < end; i = next.Add(1) - 1 {
				if err := op(i); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	next.Store(end)
	return time.Since(start)
}
