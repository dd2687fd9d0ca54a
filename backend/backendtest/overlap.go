package backendtest

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/statetest"
)

// Race tests must really race: a test whose goroutines happen to run one
// after another passes whatever the backend does. So every racing goroutine
// starts behind a barrier, records when each of its calls began and ended,
// and the test checks that calls of different goroutines overlapped. To make
// overlap the rule rather than luck on a fast backend (memory), the stores
// of the suite read a clock that yields the processor on every reading: a
// call reads the clock before it reaches the backend, so another goroutine
// gets to start its own call meanwhile.

// yieldingClock is a statetest.Clock that yields on every reading.
type yieldingClock struct{ *statetest.Clock }

var _ state.TimerClock = yieldingClock{}

func (c yieldingClock) Now() time.Time {
	runtime.Gosched()
	return c.Clock.Now()
}

// A span is one call of a race: who made it and when, in nanoseconds since
// the race began.
type span struct {
	client     int
	call, done int64
}

// A race runs n goroutines that start together and records their calls.
type race struct {
	start time.Time
	mu    sync.Mutex
	spans []span
}

// run starts f(i) for i in [0, n) behind a barrier (every goroutine is
// running before any proceeds) and waits for all of them.
func (r *race) run(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(n)
	for i := range n {
		done.Go(func() {
			ready.Done()
			<-gate
			f(i)
		})
	}
	ready.Wait()
	r.start = time.Now()
	close(gate)
	done.Wait()
}

// now is the time since the race began.
func (r *race) now() int64 { return time.Since(r.start).Nanoseconds() }

// record adds a call of client that began at call (from now).
func (r *race) record(client int, call int64) {
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, span{client: client, call: call, done: ret})
}

// overlapping returns how many calls overlapped a call of another client.
func overlapping(spans []span) int {
	n := 0
	for i, a := range spans {
		for j, b := range spans {
			if i != j && a.client != b.client && a.call < b.done && b.call < a.done {
				n++
				break
			}
		}
	}
	return n
}

// checkOverlap fails the test unless at least a quarter of the calls
// overlapped a call of another client: the goroutines really raced.
func checkOverlap(t *testing.T, what string, spans []span) {
	t.Helper()
	n := overlapping(spans)
	t.Logf("%s: %d of %d calls overlapped a call of another goroutine", what, n, len(spans))
	if 4*n < len(spans) {
		t.Errorf("%s: only %d of %d calls overlapped another goroutine's: the race did not race, so it proves nothing", what, n, len(spans))
	}
}
