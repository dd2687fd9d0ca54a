package s3state

import (
	"math/rand/v2"
	"net/http"
	"testing"
	"time"
)

// TestClockNarrowsToTheServersSecondTurning feeds the clock answers from a
// server 3h17m12.345s ahead, sent at every phase of its second, and checks
// that the estimate closes in on the offset, never claiming a precision it
// does not have.
func TestClockNarrowsToTheServersSecondTurning(t *testing.T) {
	const offset = 3*time.Hour + 17*time.Minute + 12345*time.Millisecond
	c := &serverClock{}
	if c.uncertainty() != time.Second {
		t.Fatalf("a clock without answers claims %v", c.uncertainty())
	}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	sent := base
	for i := range 500 {
		sent = sent.Add(time.Duration(rng.IntN(50_000)) * time.Microsecond)
		recv := sent.Add(2 * time.Millisecond)
		at := sent.Add(time.Millisecond).Add(offset) // when the server answered, by its clock
		c.observe(sent, recv, at.Format(http.TimeFormat))
		lo, hi := c.lo, c.hi
		if lo > offset || hi < offset {
			t.Fatalf("after %d answers the interval [%v, %v] misses the offset %v", i+1, lo, hi, offset)
		}
	}
	if w := c.hi - c.lo; w > 15*time.Millisecond {
		t.Errorf("after 500 answers over %v the interval is %v wide", sent.Sub(base), w)
	}
}

// TestClockStartsOverWhenAClockIsStepped checks that answers that cannot
// all be true (the local clock was stepped) restart the estimate instead
// of leaving it empty or wrong.
func TestClockStartsOverWhenAClockIsStepped(t *testing.T) {
	c := &serverClock{}
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c.observe(base, base.Add(time.Millisecond), base.Format(http.TimeFormat))
	later := base.Add(time.Minute)
	c.observe(later, later.Add(time.Millisecond), later.Add(time.Hour).Format(http.TimeFormat)) // the server jumped an hour
	if c.lo < time.Hour-2*time.Millisecond || c.hi > time.Hour+time.Second {
		t.Fatalf("after the step the interval is [%v, %v], want about an hour", c.lo, c.hi)
	}
}

// TestClockKeepsTheMachinesWhenTheServerAgrees: with a server whose clock
// is the machine's, the estimate is the machine's clock from the first
// answer on, so that it does not move as the interval narrows (a store's
// timestamps and the driver's expiry then agree from the start).
func TestClockKeepsTheMachinesWhenTheServerAgrees(t *testing.T) {
	c := &serverClock{}
	now := time.Now()
	c.observe(now.Add(-time.Millisecond), now, now.Format(http.TimeFormat))
	if c.skewed() {
		t.Fatal("a server in step with the machine is taken as skewed")
	}
	before := time.Now()
	got := c.now()
	if got.Before(before) || got.After(time.Now()) {
		t.Errorf("the estimate %v is not the machine's clock (%v)", got, before)
	}
}
