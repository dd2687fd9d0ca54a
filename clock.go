package state

import (
	"context"
	"sync/atomic"
	"time"
)

// A Clock tells a Store what time it is. Inject one with Options.Clock to
// drive TTLs in tests without sleeping (see package statetest).
type Clock interface {
	Now() time.Time
}

// ClockFunc adapts a function to a Clock.
type ClockFunc func() time.Time

// Now returns f().
func (f ClockFunc) Now() time.Time { return f() }

// A TimerClock is a Clock that can also wake a goroutine when it reaches a
// time. When a store's clock is one, KeepAlive waits on it, so that a fake
// clock (statetest.Clock) drives renewals and expiry without sleeping;
// otherwise the store waits on the process's timers.
type TimerClock interface {
	Clock
	// TimerAt returns a channel that receives once the clock reaches t (at
	// once if it has) and a function that stops the timer.
	TimerAt(t time.Time) (<-chan time.Time, func())
}

// timerAt returns a timer that fires when the store's clock reaches t.
func (c *core) timerAt(t time.Time) (<-chan time.Time, func()) {
	if tc, ok := c.clock.(TimerClock); ok {
		return tc.TimerAt(t)
	}
	tm := time.NewTimer(max(t.Sub(c.clock.Now()), 0))
	return tm.C, func() { tm.Stop() }
}

// systemClock is the process clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// serverClock follows the clock of a shared backend server: it measures the
// server's offset from the process clock now and then and applies it. Only
// timestamps the store writes come from it; expiry itself is decided by the
// server (the store passes a zero now to the driver).
type serverClock struct {
	src    *gate        // whose driver has a server clock (backend.ServerClock)
	offset atomic.Int64 // nanoseconds to add to the process clock
}

func (c *serverClock) Now() time.Time {
	return time.Now().Add(time.Duration(c.offset.Load()))
}

// sync measures the offset, assuming the request and reply took equally long.
func (c *serverClock) sync(ctx context.Context) error {
	t0 := time.Now()
	st, err := c.src.ServerTime(ctx)
	if err != nil {
		return err
	}
	t1 := time.Now()
	mid := t0.Add(t1.Sub(t0) / 2)
	c.offset.Store(int64(st.Sub(mid)))
	return nil
}
