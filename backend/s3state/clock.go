package s3state

import (
	"net/http"
	"sync"
	"time"
)

// serverClock estimates the S3 server's clock from the Date header of its
// answers, so that every process sharing a bucket judges expiry by the
// same clock, the server's, rather than each by its own.
//
// A Date of D, in whole seconds, on an answer to a request sent at local
// time s and answered at local time r says that at some local instant
// between s and r the server's clock read between D and D+1s: the
// server's offset from the local clock is in [D-r, D+1s-s]. Every answer
// narrows the interval (its bounds are kept, widened by a drift allowance
// as they age); answers that happen to straddle a change of second narrow
// it to about a round trip. The estimate is the offset in the interval
// nearest to zero: the local clock itself when the server's agrees with it
// as far as the answers tell (two machines synchronised by NTP), so that
// the estimate does not wander as the interval narrows; else the bound
// nearest to it. Reading the server's clock costs no request of its own:
// every request the store makes brings a sample, and the medium adds a few
// timed ones (calibrate).
type serverClock struct {
	mu     sync.Mutex
	lo, hi time.Duration // bounds on server time minus local time
	at     time.Time     // local time of the bounds
	ok     bool
	last   time.Time // the latest time returned, so that now never goes back
}

// driftPPM is how fast the bounds widen as they age: the local and the
// server's clocks may run at rates this many millionths apart.
const driftPPM = 200

// observe takes one answer's Date header into account.
func (c *serverClock) observe(sent, recv time.Time, date string) {
	d, err := http.ParseTime(date)
	if err != nil || recv.Before(sent) {
		return
	}
	lo, hi := d.Sub(recv), d.Add(time.Second).Sub(sent)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		widen := time.Duration(float64(recv.Sub(c.at)) * driftPPM / 1e6)
		clo, chi := c.lo-widen, c.hi+widen
		nlo, nhi := max(clo, lo), min(chi, hi)
		if nlo <= nhi {
			c.lo, c.hi, c.at = nlo, nhi, recv
			return
		}
		// The intervals do not meet: a clock was stepped. Start again.
	}
	c.lo, c.hi, c.at, c.ok = lo, hi, recv, true
}

// now returns the estimate of the server's clock (the local clock until a
// first answer came), never earlier than what it returned before.
func (c *serverClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now()
	if c.ok {
		t = t.Add(min(max(0, c.lo), c.hi))
	}
	if t.Before(c.last) {
		return c.last
	}
	c.last = t
	return t
}

// uncertainty returns the width of the interval: how far the estimate may
// be from the server's clock (a second before any answer).
func (c *serverClock) uncertainty() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ok {
		return time.Second
	}
	widen := time.Duration(float64(time.Since(c.at)) * driftPPM / 1e6)
	return c.hi - c.lo + 2*widen
}

// skewed reports whether the answers rule the local clock out: the
// server's clock is certainly ahead or behind.
func (c *serverClock) skewed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ok && (c.lo > 0 || c.hi < 0)
}

// nextProbe returns when a request should reach the server to narrow the
// interval most: when the server's clock, by the estimate, turns a second.
func (c *serverClock) nextProbe(rtt time.Duration) time.Time {
	est := c.now()
	tick := est.Truncate(time.Second).Add(time.Second)
	return time.Now().Add(tick.Sub(est) - rtt/2)
}
