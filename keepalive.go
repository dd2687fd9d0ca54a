package state

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Acquire is TryAcquire that waits while another holder has the lease: it
// tries again when the holder's lease would expire, and at least every
// Options.LeasePollInterval (to notice a release), until it gets the lease or
// ctx ends, in which case it returns ctx's error.
func (s *Store) Acquire(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error) {
	poll := s.c.opts.LeasePollInterval
	for {
		l, err := s.TryAcquire(ctx, resource, holder, ttl)
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

// KeepAlive starts renewing l every third of its TTL until ctx ends, Stop is
// called, or the lease is lost. The lease is lost when a renewal finds that
// l.Holder no longer holds it (Err then matches ErrNotHeld), or when
// renewals keep failing (the backend is unreachable) until the lease's
// expiry has passed. Done is closed when renewing stops for any reason.
func (s *Store) KeepAlive(ctx context.Context, l Lease) *KeepAlive {
	ctx, cancel := context.WithCancel(ctx)
	k := &KeepAlive{done: make(chan struct{}), cancel: cancel, lease: l}
	every := l.TTL / 3
	if every < time.Millisecond {
		every = time.Millisecond
	}
	go k.run(ctx, s, every)
	return k
}

func (k *KeepAlive) run(ctx context.Context, s *Store, every time.Duration) {
	defer close(k.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			k.finish(ctx.Err())
			return
		case <-t.C:
		}
		cur := k.Lease()
		l, err := s.Renew(ctx, cur.Resource, cur.Holder, cur.TTL)
		switch {
		case err == nil:
			k.mu.Lock()
			k.lease = l
			k.mu.Unlock()
		case errors.Is(err, ErrNotHeld) || errors.Is(err, ErrClosed):
			k.finish(err)
			return
		case ctx.Err() != nil:
			k.finish(ctx.Err())
			return
		default:
			// Transient failure: keep trying while the lease may still be ours.
			if stamp, _ := s.now(); !stamp.Before(cur.ExpiresAt) {
				k.finish(err)
				return
			}
		}
	}
}

func (k *KeepAlive) finish(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err == nil {
		k.err = err
	}
}

// Done is closed when the keep-alive stops: the lease was lost, ctx ended or
// Stop was called.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err says why the keep-alive stopped: an error matching ErrNotHeld when the
// lease was lost to another holder or expired, the last backend error when
// renewals failed until expiry, ctx's error, or context.Canceled after Stop.
// It is nil while the keep-alive runs.
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
