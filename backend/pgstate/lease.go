package pgstate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/statesidecar/state/backend"
)

// Lease implements backend.Leaser: one call of the lease function (see
// migrations/001_init.sql), which reads the lease, decides as
// state.Store.TryAcquireLease, RenewLease and ReleaseLease do, and writes
// the lease and its history event. Lease calls made at the same moment share a round trip
// and a transaction (see batcher). A call whose event's writer is not its
// holder (q.Writer: a holder acting for an authenticated principal), which
// the lease function, writing the holder, cannot record, is left to
// package state's portable code: backend.ErrSkip.
func (d *Driver) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	if q.Writer != "" && q.Writer != q.Holder {
		return backend.LeaseResult{}, backend.ErrSkip
	}
	if q.Action < backend.LeaseAcquire || q.Action > backend.LeaseRelease {
		return backend.LeaseResult{}, fmt.Errorf("pgstate: lease: unknown action %d", q.Action)
	}
	key := backend.LeaseKey(q.Resource)
	value := backend.LeaseValue(q.TTL)
	lock := d.lockKey(q.NS, key)
	out, err := d.leases.do(ctx, q.NS, lock, []any{q.NS, nowArg(q.Now), d.nsLock(q.NS), lock,
		int32(q.Action), []byte(q.Resource), q.Holder, ttlMs(q.TTL), []byte(key), value})
	if err != nil {
		return backend.LeaseResult{}, d.fail(ctx, "lease", err)
	}
	res := backend.LeaseResult{OK: out.ok, Takeover: out.takeover, Now: timeOf(q.Now, out.nowMs)}
	if out.present {
		res.Lease = out.rec.record(key)
	}
	return res, nil
}

// leaseOut is the lease function's answer.
type leaseOut struct {
	ok, takeover, present bool
	nowMs                 int64
	rec                   recordRow
}

// readLease reads the lease function's answer.
func readLease(row pgx.Row) (leaseOut, error) {
	var o leaseOut
	err := row.Scan(&o.ok, &o.nowMs, &o.takeover, &o.present, &o.rec.writer, &o.rec.rev, &o.rec.crev, &o.rec.upd,
		&o.rec.exp, &o.rec.value)
	return o, err
}
