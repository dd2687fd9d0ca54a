package state

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A Lease is an exclusive, expiring lock on a resource.
type Lease struct {
	Resource string
	Holder   string
	// Fence is the lease's fencing token: it is the same for every renewal
	// of one tenure and greater than the fence of every earlier tenure of the
	// resource, across release, expiry and Reset. Give it to the resource you
	// protect so that it can refuse a stale holder.
	Fence     int64
	ExpiresAt time.Time
	// TTL is the duration the lease was last acquired or renewed for.
	TTL time.Duration
	// Takeover is set when TryAcquireLease took the lease from a holder whose
	// lease had expired without being released.
	Takeover bool
}

// TryAcquireLease takes the lease on resource for holder for ttl (rounded up
// to a whole number of milliseconds), if it is free or expired. The holder
// acquiring its own live lease again extends it and keeps its fence, so that
// a retried call cannot lock its own caller out. When another holder has it,
// the error is a *HeldError matching ErrLeaseHeld.
func (s *Store) TryAcquireLease(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error) {
	l, err := s.leaseOp(ctx, leaseAcquire, resource, holder, ttl)
	return l, wrap("lease.acquire", resource, err)
}

// RenewLease extends holder's live lease on resource to now + ttl. It fails
// with a *NotHeldError when holder does not hold a live lease on resource.
func (s *Store) RenewLease(ctx context.Context, resource, holder string, ttl time.Duration) (Lease, error) {
	l, err := s.leaseOp(ctx, leaseRenew, resource, holder, ttl)
	return l, wrap("lease.renew", resource, err)
}

// ReleaseLease frees holder's live lease on resource and reports whether it did;
// it reports false, without error, when holder does not hold a live lease
// (an expired lease is held by no one).
func (s *Store) ReleaseLease(ctx context.Context, resource, holder string) (bool, error) {
	_, err := s.leaseOp(ctx, leaseRelease, resource, holder, 0)
	if err == nil {
		return true, nil
	}
	if err == errNotReleased {
		return false, nil
	}
	return false, wrap("lease.release", resource, err)
}

// GetLease returns the live lease on resource, or an error matching
// ErrNotFound when it is free.
func (s *Store) GetLease(ctx context.Context, resource string) (Lease, error) {
	r, err := s.getRecord(ctx, "resource_id", resource, layout.Lease(resource))
	if err != nil {
		return Lease{}, wrap("lease.get", resource, err)
	}
	return Lease{Resource: resource, Holder: r.Writer, Fence: r.CreateRevision, ExpiresAt: r.ExpiresAt,
		TTL: leaseTTLOf(r)}, nil
}

type leaseAction int

const (
	leaseAcquire leaseAction = iota
	leaseRenew
	leaseRelease
)

// errNotReleased is ReleaseLease's internal "nothing to release".
var errNotReleased = &NotHeldError{}

// leaseOp validates and runs one lease operation as an atomic
// read-modify-write of the lease record.
func (s *Store) leaseOp(ctx context.Context, act leaseAction, resource, holder string, ttl time.Duration) (Lease, error) {
	lim := s.c.opts.Limits
	if err := checkKey("resource_id", resource, lim.MaxKeyBytes); err != nil {
		return Lease{}, err
	}
	if err := checkKey("holder_id", holder, lim.MaxIDBytes); err != nil {
		return Lease{}, err
	}
	if act != leaseRelease {
		if err := checkTTL("ttl", ttl); err != nil {
			return Lease{}, err
		}
		ttl = roundTTL(ttl)
	}
	done, err := s.enter()
	if err != nil {
		return Lease{}, err
	}
	defer done()
	if s.c.drv.leaser != nil {
		l, err := s.leaseNative(ctx, act, resource, holder, ttl)
		if !errors.Is(err, backend.ErrSkip) {
			return l, err
		}
	}
	rk := layout.Lease(resource)
	var out Lease
	res, err := s.update(ctx, []string{rk}, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		r := recs[0]
		mine := r.Live() && r.Writer == holder
		out = Lease{Resource: resource, Holder: holder, TTL: ttl, ExpiresAt: now.Add(ttl)}
		put := backend.Op{Kind: backend.OpPut, Key: rk, Value: backend.LeaseValue(ttl), Writer: holder, TTL: ttl, Time: now}
		ev := backend.Event{Key: resource, Writer: holder}
		if r.Live() {
			ev.Prev = layout.LeaseEventOf(r.Writer, r.CreateRevision, r.ExpiresAt)
		}
		switch {
		case act == leaseRelease && !mine:
			return nil, errNotReleased
		case act == leaseRelease:
			out.ExpiresAt, out.Fence = now, r.CreateRevision
			ev.Op = "lease.release"
			return &backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: rk}}, Events: []backend.Event{ev}}, nil
		case act == leaseRenew && !mine:
			if r.Live() {
				return nil, &NotHeldError{Holder: r.Writer}
			}
			return nil, &NotHeldError{}
		case !mine && r.Live():
			return nil, &HeldError{Holder: r.Writer, ExpiresAt: r.ExpiresAt}
		case mine:
			out.Fence = r.CreateRevision
			ev.Op = "lease.acquire"
			if act == leaseRenew {
				ev.Op = "lease.renew"
			}
		default: // free, or expired: a new tenure whose fence is this commit's revision
			out.Takeover = r.Found() && r.Writer != holder
			ev.Op = "lease.acquire"
			if out.Takeover {
				ev.Op = "lease.takeover"
				ev.Prev = layout.LeaseEventOf(r.Writer, r.CreateRevision, r.ExpiresAt)
			}
		}
		ev.Value = layout.LeaseEventOf(holder, out.Fence, out.ExpiresAt)
		return &backend.Txn{Then: []backend.Op{put}, Events: []backend.Event{ev}}, nil
	})
	if err != nil {
		return Lease{}, err
	}
	if out.Fence == 0 {
		out.Fence = res.Revision
	}
	return out, nil
}

// leaseNative runs a lease operation through the driver's one-round-trip
// fast path. It returns an error matching backend.ErrSkip when the driver
// cannot.
func (s *Store) leaseNative(ctx context.Context, act leaseAction, resource, holder string, ttl time.Duration) (Lease, error) {
	_, now := s.now()
	actions := [...]backend.LeaseAction{leaseAcquire: backend.LeaseAcquire, leaseRenew: backend.LeaseRenew, leaseRelease: backend.LeaseRelease}
	res, err := s.c.drv.Lease(ctx, &backend.LeaseQuery{NS: s.ns, Now: now, Action: actions[act], Resource: resource, Holder: holder, TTL: ttl,
		Writer: eventWriter(ctx, holder)})
	if err != nil {
		return Lease{}, err
	}
	r := res.Lease
	if !res.OK {
		switch {
		case act == leaseRelease:
			return Lease{}, errNotReleased
		case act == leaseAcquire && r.Live():
			return Lease{}, &HeldError{Holder: r.Writer, ExpiresAt: r.ExpiresAt}
		case r.Live():
			return Lease{}, &NotHeldError{Holder: r.Writer}
		}
		return Lease{}, &NotHeldError{}
	}
	out := Lease{Resource: resource, Holder: holder, Fence: r.CreateRevision, ExpiresAt: r.ExpiresAt, TTL: ttl, Takeover: res.Takeover}
	if act == leaseRelease {
		out.ExpiresAt, out.TTL = res.Now, 0
	}
	return out, nil
}

func leaseTTLOf(r backend.Record) time.Duration {
	var v struct {
		TTL int64 `json:"ttl_ms"`
	}
	_ = json.Unmarshal(r.Value, &v)
	return time.Duration(v.TTL) * time.Millisecond
}
