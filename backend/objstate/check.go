package objstate

import (
	"context"
	"errors"

	"github.com/statesidecar/state/backend"
)

// A read check tells the reads waiting for it that the cache is current:
// it reads the head conditioned on the tag the cache is at (GET
// If-None-Match), and an answer that the head is unchanged means that the
// cache was current when the server answered, after every read that
// waits for the check began. Checks do not wait for the leader, which may
// be writing meanwhile, and up to maxChecks run at once, each taking the
// reads that arrived since the one before started: a read waits for about
// one round trip rather than for the rest of a check in flight and then
// a whole one. A check that finds the head moved (or the cache not
// loaded, or fails) tells its reads to ask the leader, which brings the
// cache up to the head.

// maxChecks bounds the read checks of a namespace in flight at once.
const maxChecks = 2

// errAskLeader is a check's answer when it could not tell.
var errAskLeader = errors.New("objstate: the read check could not tell")

// awaitCheck waits for a read check that starts after the call, and
// returns its round (whose err is errAskLeader when it could not tell).
// When fewer than maxChecks run, the caller runs one itself, for the reads
// waiting too: a lone read hands nothing over to another goroutine.
func (s *space) awaitCheck(ctx context.Context) (*round, error) {
	s.lock()
	r := s.waiting
	if r == nil {
		r = &round{done: make(chan struct{})}
	}
	if s.checking < maxChecks {
		s.waiting = nil
		s.checking++
		s.unlock()
		s.check(ctx, r) // bounded by the caller's deadline: reads that waited for it ask the leader if it runs out
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return r, nil
	}
	s.waiting = r
	s.unlock()
	select {
	case <-r.done:
		return r, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// startCheck starts a check for the reads waiting, in a goroutine of its
// own; s.mu is held.
func (s *space) startCheck() {
	r := s.waiting
	s.waiting = nil
	s.checking++
	if !s.d.start(func() { s.check(s.d.life, r) }) {
		s.checking--
		r.err = backend.ErrClosed
		close(r.done)
	}
}

// check runs one read check for the reads of r, then starts the next one
// if reads wait for it.
func (s *space) check(ctx context.Context, r *round) {
	s.dmu.RLock()
	tag, loaded := s.tag, s.data != nil
	s.dmu.RUnlock()
	r.err = errAskLeader
	if loaded && tag != "" {
		if _, err := s.d.read(ctx, s.headKey, tag); errors.Is(err, ErrUnchanged) {
			r.err = nil
		}
	}
	close(r.done)
	s.lock()
	s.checking--
	if s.waiting != nil && s.checking < maxChecks {
		s.startCheck()
	}
	s.unlock()
}
