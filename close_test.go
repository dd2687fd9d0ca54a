package state_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
)

// realWait bounds waits on real goroutines; generous, because a busy
// two-core machine may be slow, and never reached when things work.
const realWait = 30 * time.Second

// hangingSweeper is a memory backend whose Sweep hangs until its context
// ends, reporting each start and how each ended.
type hangingSweeper struct {
	*memstate.Driver
	started chan struct{}
	mu      sync.Mutex
	ended   []error
	closed  bool
	late    int // sweeps started after Close
}

func (d *hangingSweeper) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	d.mu.Lock()
	if d.closed {
		d.late++
	}
	d.mu.Unlock()
	select {
	case d.started <- struct{}{}:
	default:
	}
	<-ctx.Done()
	d.mu.Lock()
	d.ended = append(d.ended, ctx.Err())
	d.mu.Unlock()
	return backend.SweepResult{}, ctx.Err()
}

func (d *hangingSweeper) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return d.Driver.Close()
}

func TestCloseCancelsASweepInProgressAndStartsNoOther(t *testing.T) {
	d := &hangingSweeper{Driver: memstate.New(), started: make(chan struct{}, 1)}
	// A long sweep interval bounds the old per-sweep timeout: Close must not
	// wait for it.
	st, err := state.New(d, &state.Options{SweepInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.started:
	case <-time.After(realWait):
		t.Fatal("the background sweeper never started a sweep")
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(realWait):
		t.Fatal("Close waits for a hung sweep")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ended) == 0 || !errors.Is(d.ended[len(d.ended)-1], context.Canceled) {
		t.Errorf("Close must cancel the sweep in progress; the sweeps ended with %v", d.ended)
	}
	if d.late != 0 {
		t.Errorf("%d sweeps started after Close", d.late)
	}
}

// clockAsker is a memory backend that claims to be shared and signals every
// reading of its server clock.
type clockAsker struct {
	*memstate.Driver
	asked chan struct{}
}

func (d *clockAsker) ServerTime(context.Context) (time.Time, error) {
	select {
	case d.asked <- struct{}{}:
	default:
	}
	return time.Now(), nil
}

func TestServerClockIsResyncedWithSweepingOff(t *testing.T) {
	d := &clockAsker{Driver: memstate.New(), asked: make(chan struct{})}
	st, err := state.New(d, &state.Options{SweepInterval: -1, ClockSyncInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		select {
		case <-d.asked:
		case <-time.After(realWait):
			t.Fatalf("the server clock was read %d times with sweeping off; it must be read again every ClockSyncInterval", i)
		}
	}
}
