package pgstate

import (
	"context"
	"fmt"
	"strconv"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Lease implements backend.Leaser: one call of the lease function (see
// migrations/001_init.sql), which reads the lease, decides as
// state.Store.TryAcquire, Renew and Release do, and writes the lease and its
// history event.
func (d *Driver) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	err := d.enter(ctx)
	if err != nil {
		return backend.LeaseResult{}, err
	}
	if q.Action < backend.LeaseAcquire || q.Action > backend.LeaseRelease {
		return backend.LeaseResult{}, fmt.Errorf("pgstate: lease: unknown action %d", q.Action)
	}
	key := layout.Lease(q.Resource)
	// The record's value is the TTL, as package state writes it (leaseValue).
	value := []byte(`{"ttl_ms":` + strconv.FormatInt(q.TTL.Milliseconds(), 10) + `}`)
	row := d.pool.QueryRow(ctx, d.q.lease, q.NS, nowArg(q.Now), d.nsLock(q.NS), d.lockKey(q.NS, key),
		int32(q.Action), []byte(q.Resource), q.Holder, ttlMs(q.TTL), []byte(key), value)
	var res backend.LeaseResult
	var nowMs int64
	var present bool
	var rec recordRow
	if err := row.Scan(&res.OK, &nowMs, &res.Takeover, &present, &rec.writer, &rec.rev, &rec.crev, &rec.upd, &rec.exp, &rec.value); err != nil {
		return backend.LeaseResult{}, d.fail(ctx, "lease", err)
	}
	res.Now = timeOf(q.Now, nowMs)
	if present {
		res.Lease = rec.record(key)
	}
	return res, nil
}
