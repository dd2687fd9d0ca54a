package backendtest

import (
	"cmp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statesidecar/state/statetest"
)

// A timedRace records a porcupine history of clients racing on a store
// while a ticker moves the store's fake clock forward, so that leases and
// claims expire and are taken over in the middle of the race. A tick never
// happens during a call (the store reads its clock before the backend
// applies the call, so a tick inside one would leave the call's time
// ambiguous); calls of different clients overlap freely between ticks. A
// tick is an operation of the history, input tickInput, in every partition.
type timedRace struct {
	race
	clk     *statetest.Clock
	epoch   sync.RWMutex // read-held by calls, write-held by ticks
	mu      sync.Mutex
	ops     []porcupine.Operation
	kick    chan struct{}
	clients int
}

// tickInput is the input of a tick: the clock moved forward by ms.
type tickInput struct{ ms int64 }

func newTimedRace(clk *statetest.Clock, clients int) *timedRace {
	return &timedRace{clk: clk, kick: make(chan struct{}, 1), clients: clients}
}

// ms returns t as milliseconds since the suite's epoch.
func ms(t time.Time) int64 { return t.Sub(t0).Milliseconds() }

// call runs f as one operation of client and records it with the input and
// output f returns.
func (r *timedRace) call(client int, f func() (in, out any)) {
	r.epoch.RLock()
	start := r.now()
	in, out := f()
	end := r.now()
	r.epoch.RUnlock()
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: start, Return: end})
	n := len(r.ops)
	r.mu.Unlock()
	if n%5 == 0 {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

// run runs every client behind a barrier, and a ticker that moves the
// clock by one of steps (cycling) after every few calls, until the clients
// are done. It returns the history.
func (r *timedRace) run(steps []time.Duration, client func(i int)) []porcupine.Operation {
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-r.kick:
			}
			d := steps[i%len(steps)]
			r.epoch.Lock()
			start := r.now()
			r.clk.Advance(d)
			end := r.now()
			r.epoch.Unlock()
			r.mu.Lock()
			r.ops = append(r.ops, porcupine.Operation{ClientId: r.clients, Input: tickInput{d.Milliseconds()}, Call: start, Return: end})
			r.mu.Unlock()
		}
	}()
	r.race.run(r.clients, client)
	close(done)
	<-ticked
	return r.ops
}

// checkLinearizable fails the test unless model explains history, and
// unless the race raced.
func checkLinearizable(t *testing.T, what string, model porcupine.Model, history []porcupine.Operation) {
	t.Helper()
	var calls []span
	ticks := 0
	for _, op := range history {
		if _, ok := op.Input.(tickInput); ok {
			ticks++
			continue
		}
		calls = append(calls, span{client: op.ClientId, call: op.Call, done: op.Return})
	}
	checkOverlap(t, what, calls)
	if ticks < 3 {
		t.Errorf("%s: the clock moved only %d times during the race: expiry was not exercised", what, ticks)
	}
	res, _ := porcupine.CheckOperationsVerbose(model, history, time.Minute)
	if res != porcupine.Ok {
		sorted := slices.Clone(history)
		slices.SortFunc(sorted, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		for _, op := range sorted {
			t.Logf("client %d [%d, %d] %s", op.ClientId, op.Call, op.Return, model.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("%s: the history of %d calls and %d clock ticks is %s: no sequential execution explains it", what, len(calls), ticks, res)
	}
}
