// Package statetest helps test code that uses package state: a fake clock
// that moves only when told to, and a ready store over memory.
package statetest

import (
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
)

// Epoch is where a new Clock starts: 2030-01-01T00:00:00Z. A driver that
// secretly reads the wall clock disagrees with it.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// A Clock is a state.Clock that moves only when told to. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ state.Clock = (*Clock)(nil)

// NewClock returns a Clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// NewStore returns a store over a fresh memory backend driven by a new
// Clock, with the background sweeper off, closed when the test ends.
func NewStore(tb testing.TB) (*state.Store, *Clock) {
	tb.Helper()
	clk := NewClock()
	st := state.New(memstate.New(), &state.Options{Clock: clk, SweepInterval: -1})
	tb.Cleanup(func() { _ = st.Close() })
	return st, clk
}
