package objstate

import (
	"context"
	"errors"
	"runtime"

	"github.com/statesidecar/state/backend"
)

// A read check tells the reads waiting for it that the cache is current:
// it reads the head conditioned on the tag the cache is at (GET
// If-None-Match), and an answer that the head is unchanged means that the
// cache was current when the server answered, after every read that
// waits for the check began. A check takes the reads waiting as late as
// it can, just before it sends its request, having first let the
// goroutines ready to run do so: the readers the check before released
// come back and join it, so that one request serves the reads of a busy
// namespace together (26 of 32 concurrent readers on average, measured)
// rather than a trickle of checks each serving a few. Checks do not wait
// for the leader, which may be writing meanwhile, and at most maxChecks
// run at once; a read waits for the rest of the check in flight and then
// one whole check at most. A check that finds the head moved (or the
// cache not loaded, or fails) tells its reads to ask the leader, which
// brings the cache up to the head.

// maxChecks bounds the read checks of a namespace in flight at once. One
// check at a time costs a read at most two round trips and serves the
// most reads per request: with more, at thirty-two readers the requests
// multiply while each serves fewer reads, and on a machine short of CPU
// (the client's and the server's) reads got slower, not faster.
const maxChecks = 1

// maxYields bounds the times a check lets the goroutines ready to run go
// first while readers keep joining it (gather).
const maxYields = 8

// errAskLeader is a check's answer when it could not tell.
var errAskLeader = errors.New("objstate: the read check could not tell")

// awaitCheck waits for a read check that starts after the call, and
// returns its round (whose err is errAskLeader when it could not tell).
// When no check runs, the caller runs one itself, for the reads waiting
// too: a lone read hands nothing over to another goroutine.
func (s *space) awaitCheck(ctx context.Context) (*round, error) {
	s.lock()
	r := s.waiting
	if r == nil {
		r = &round{done: make(chan struct{})}
		s.waiting = r
	}
	r.readers++
	if s.checking < maxChecks {
		s.checking++
		s.unlock()
		s.check(ctx) // bounded by the caller's deadline: reads that waited for it ask the leader if it runs out
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	} else {
		s.unlock()
	}
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
	s.checking++
	if !s.d.start(func() { s.check(s.d.life) }) {
		s.checking--
		r := s.waiting
		s.waiting = nil
		r.err = backend.ErrClosed
		close(r.done)
	}
}

// check runs one read check for the reads waiting when it sends its
// request, then starts the next one if reads wait for it. The caller has
// counted it in s.checking.
func (s *space) check(ctx context.Context) {
	s.gather()
	s.lock()
	r := s.waiting
	s.waiting = nil
	if r != nil {
		s.lastReaders = r.readers
	}
	s.unlock()
	if r != nil {
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
	}
	s.lock()
	s.checking--
	if s.waiting != nil && s.checking < maxChecks {
		s.startCheck()
	}
	s.unlock()
}

// gather lets the goroutines ready to run (readers the last check
// released, about to read again) join the check about to take its round,
// yielding while more keep joining. A namespace read by one goroutine at
// a time skips it: yielding costs a lone read several microseconds on a
// machine where waking another thread is a system call, which a directory
// read of a few microseconds would feel.
func (s *space) gather() {
	s.lock()
	busy := s.lastReaders > 1 || (s.waiting != nil && s.waiting.readers > 1)
	s.unlock()
	if !busy {
		return
	}
	joined := -1
	for range maxYields {
		runtime.Gosched()
		s.lock()
		n := 0
		if s.waiting != nil {
			n = s.waiting.readers
		}
		s.unlock()
		if n == joined {
			return
		}
		joined = n
	}
}
