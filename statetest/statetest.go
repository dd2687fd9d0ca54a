// Package statetest helps test code that uses package state: a fake clock
// that moves only when told to, and a ready store over memory.
package statetest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
)

// Epoch is where a new Clock starts: 2030-01-01T00:00:00Z. A driver that
// secretly reads the wall clock disagrees with it.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// A Clock is a state.Clock that moves only when told to. It is also a
// state.TimerClock: its timers fire when Advance or Set moves it to or past
// their time, so that code waiting on the store's clock (KeepAlive) is
// driven by the test. It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced whenever timers change
}

type timer struct {
	at time.Time
	c  chan time.Time
}

var _ state.TimerClock = (*Clock)(nil)

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch, changed: make(chan struct{})} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d, firing the timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveTo(c.now.Add(d))
}

// Set moves the clock to t, firing the timers it reaches.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.moveTo(t)
}

// moveTo sets the time and fires due timers; c.mu is held.
func (c *Clock) moveTo(t time.Time) {
	c.now = t
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
			continue
		}
		tm.c <- t // buffered, and each timer fires once
	}
	if len(kept) != len(c.timers) {
		clear(c.timers[len(kept):])
		c.timers = kept
		c.notify()
	}
}

// notify wakes WaitTimers; c.mu is held.
func (c *Clock) notify() {
	if c.changed == nil { // a zero Clock
		c.changed = make(chan struct{})
		return
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// TimerAt implements state.TimerClock: the channel receives the clock's time
// once the clock reaches t, at once if it has.
func (c *Clock) TimerAt(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tm := &timer{at: t, c: make(chan time.Time, 1)}
	if !t.After(c.now) {
		tm.c <- c.now
		return tm.c, func() {}
	}
	c.timers = append(c.timers, tm)
	c.notify()
	return tm.c, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if i := slices.Index(c.timers, tm); i >= 0 {
			c.timers = slices.Delete(c.timers, i, i+1)
			c.notify()
		}
	}
}

// Timers returns the times of the timers waiting for the clock, earliest
// first.
func (c *Clock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ts := make([]time.Time, len(c.timers))
	for i, tm := range c.timers {
		ts[i] = tm.at
	}
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// WaitTimers waits until at least n timers wait for the clock (the code
// under test has got as far as waiting on it), or ctx ends.
func (c *Clock) WaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		have, changed := len(c.timers), c.changed
		c.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// NewStore returns a store over a fresh memory backend driven by a new
// Clock, with the background sweeper off, closed when the test ends.
func NewStore(tb testing.TB) (*state.Store, *Clock) {
	tb.Helper()
	clk := NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk, SweepInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st, clk
}
