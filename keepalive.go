package state

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// AcquireLease is TryAcquireLease that waits while another holder has the lease: it
// tries again when the holder's lease would expire, and at least every
// Options.LeasePollInterval (to notice a release), until it gets the lease or
// ctx ends, in which case it returns ctx's error.
func (s *Store) AcquireLease(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error) {
	poll := s.c.opts.LeasePollInterval
	for {
		l, err := s.TryAcquireLease(ctx, resource, holder, ttl)
		var held *HeldError
		if !errors.As(err, &held) {
			return l, err
		}
		wait := poll
		stamp, _ := s.now()
		if d := held.ExpiresAt.Sub(stamp); d > 0 && d < wait {
			wait = d
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Lease{}, wrap("lease.acquire", resource, ctx.Err())
		case <-s.c.bg.Done():
			t.Stop()
			return Lease{}, wrap("lease.acquire", resource, ErrClosed)
		case <-t.C:
		}
	}
}

// A KeepAlive renews a lease in the background until it is stopped or the
// lease is lost. Create one with Store.KeepAlive.
type KeepAlive struct {
	done   chan struct{}
	cancel context.CancelFunc
	mu     sync.Mutex
	lease  Lease
	err    error
}

// A LeaseExpiredError reports that a lease reached its expiry before a
// renewal succeeded: the backend was unreachable, slow or hung. It matches
// ErrNotHeld and, when a renewal failed, that renewal's error.
type LeaseExpiredError struct {
	// ExpiresAt is the expiry the lease reached, by the store's clock.
	ExpiresAt time.Time
	// Last is the error of the last failed renewal, or nil when none had
	// failed (a renewal was still running, or none was due).
	Last error
}

// Error implements error.
func (e *LeaseExpiredError) Error() string {
	msg := "not held by the caller: the lease expired at " + e.ExpiresAt.UTC().Format(time.RFC3339Nano) + " before a renewal succeeded"
	if e.Last != nil {
		return msg + " (last renewal: " + e.Last.Error() + ")"
	}
	return msg
}

// Unwrap returns ErrNotHeld and the last renewal error.
func (e *LeaseExpiredError) Unwrap() []error {
	if e.Last == nil {
		return []error{ErrNotHeld}
	}
	return []error{ErrNotHeld, e.Last}
}

// KeepAlive renews l in the background until ctx ends, Stop is called, the
// store is closed, or the lease is lost; Done is closed when it stops, and
// Err says why.
//
// It renews every third of l.TTL, each renewal under a deadline before the
// lease's expiry (less a safety margin of a tenth of the TTL). A renewal
// that finds l.Holder no longer holds the lease ends it with an error
// matching ErrNotHeld; other failures are retried with growing, jittered
// pauses while the lease may still be renewed. Whatever a renewal is doing,
// a timer on the store's clock ends the keep-alive at the lease's expiry
// with a *LeaseExpiredError (also matching ErrNotHeld): the expiry it
// watches is the earlier of the one the backend reported and the time the
// renewal was sent plus the TTL, so a slow reply cannot make it late.
//
// A lease whose TTL is below a millisecond (or zero) is rejected: the
// KeepAlive returned has stopped already and Err matches ErrInvalid.
func (s *Store) KeepAlive(ctx context.Context, l Lease) *KeepAlive {
	k := &KeepAlive{done: make(chan struct{}), lease: l, cancel: func() {}}
	fail := func(err error) *KeepAlive {
		k.err = wrap("lease.keepalive", l.Resource, err)
		close(k.done)
		return k
	}
	if err := checkTTL("ttl", l.TTL); err != nil {
		return fail(err)
	}
	l.TTL = roundTTL(l.TTL)
	k.lease = l
	done, err := s.enter()
	if err != nil {
		return fail(err)
	}
	s.c.keepalives.Add(1)
	done()
	ctx, k.cancel = context.WithCancel(ctx)
	go func() {
		defer s.c.keepalives.Done()
		k.run(ctx, s)
	}()
	return k
}

// renewal is the outcome of one renewal attempt.
type renewal struct {
	lease Lease
	err   error
	sent  time.Time
}

// run is the keep-alive's goroutine. It never waits on a renewal: each runs
// in a goroutine of its own, whose context run cancels when it returns.
func (k *KeepAlive) run(ctx context.Context, s *Store) {
	defer close(k.done)
	c := s.c
	l := k.Lease()
	ttl := l.TTL
	margin := max(ttl/10, time.Millisecond)
	expiry := l.ExpiresAt
	expC, stopExp := c.timerAt(expiry)
	renC, stopRen := c.timerAt(expiry.Add(-2 * ttl / 3))
	results := make(chan renewal, 1)
	stopRenewal := func() {}
	defer func() { stopExp(); stopRen(); stopRenewal() }()
	var last error
	failures := 0
	for {
		select {
		case <-ctx.Done():
			k.finish(ctx.Err())
			return
		case <-c.bg.Done():
			k.finish(ErrClosed)
			return
		case <-expC:
			k.finish(&LeaseExpiredError{ExpiresAt: expiry, Last: last})
			return
		case <-renC:
			sent, _ := s.now()
			rctx, cancel := context.WithTimeout(ctx, min(expiry.Add(-margin).Sub(sent), ttl/3))
			stopRenewal = cancel
			go func() {
				nl, err := s.RenewLease(rctx, l.Resource, l.Holder, ttl)
				results <- renewal{lease: nl, err: err, sent: sent}
			}()
			renC = nil
		case r := <-results:
			stopRenewal()
			switch {
			case r.err == nil:
				failures, last = 0, nil
				expiry = r.lease.ExpiresAt
				if local := r.sent.Add(ttl); local.Before(expiry) {
					expiry = local
				}
				k.mu.Lock()
				k.lease = r.lease
				k.mu.Unlock()
				stopExp()
				expC, stopExp = c.timerAt(expiry)
				renC, stopRen = c.timerAt(expiry.Add(-2 * ttl / 3))
			case errors.Is(r.err, ErrNotHeld), errors.Is(r.err, ErrClosed), errors.Is(r.err, ErrInvalid):
				k.finish(r.err)
				return
			case ctx.Err() != nil:
				k.finish(ctx.Err())
				return
			default: // transient: try again after a pause, while a renewal can still be in time
				failures++
				last = r.err
				now, _ := s.now()
				if at := now.Add(renewBackoff(ttl, failures)); at.Before(expiry.Add(-margin)) {
					renC, stopRen = c.timerAt(at)
				}
			}
		}
	}
}

// renewBackoff is the pause after the nth consecutive failed renewal of a
// lease of ttl: from a hundredth of the TTL (at least a millisecond), doubling
// up to a sixth, with the lower half jittered so that keep-alives of many
// processes do not retry in step.
func renewBackoff(ttl time.Duration, n int) time.Duration {
	d := max(ttl/100, time.Millisecond)
	for i := 1; i < n && d < ttl/6; i++ {
		d *= 2
	}
	d = min(d, max(ttl/6, time.Millisecond))
	return d/2 + rand.N(d/2+1)
}

func (k *KeepAlive) finish(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = wrap("lease.keepalive", k.lease.Resource, err)
	}
}

// Done is closed when the keep-alive stops: the lease was lost or expired,
// ctx ended, the store was closed or Stop was called.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err says why the keep-alive stopped: an error matching ErrNotHeld when the
// lease was lost to another holder or expired (a *LeaseExpiredError, which
// also matches the last renewal's error, when renewals did not succeed in
// time), ErrClosed when the store was closed, ErrInvalid for a lease it
// rejected, ctx's error, or context.Canceled after Stop. It is nil while the
// keep-alive runs.
func (k *KeepAlive) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Lease returns the lease as last renewed.
func (k *KeepAlive) Lease() Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// Stop stops renewing (without releasing the lease) and waits until the
// keep-alive has stopped.
func (k *KeepAlive) Stop() {
	k.cancel()
	<-k.done
}
