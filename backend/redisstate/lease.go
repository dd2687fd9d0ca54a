package redisstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// Lease implements backend.Leaser: one script that reads the lease, decides
// as state.Store.TryAcquireLease, RenewLease and ReleaseLease do, and
// writes the lease and its history event (lua/lease.lua). Lease calls of
// one namespace made at the same moment share a script call (batch.go).
func (d *Driver) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	if q.Action < backend.LeaseAcquire || q.Action > backend.LeaseRelease {
		return backend.LeaseResult{}, fmt.Errorf("redisstate: lease: unknown action %d", q.Action)
	}
	if err := d.touch(ctx, q.NS); err != nil {
		return backend.LeaseResult{}, err
	}
	return d.leases.do(ctx, q.NS, q.Now, q)
}

// leaseArgs appends the script arguments of lease call q.
func leaseArgs(args []any, q *backend.LeaseQuery) []any {
	holder, _ := json.Marshal(q.Holder) // a string always encodes
	writer := q.Writer
	if writer == "" {
		writer = q.Holder
	}
	return append(args, int(q.Action), q.Resource, q.Holder, ttlMs(q.TTL), backend.LeaseKey(q.Resource), holder, writer)
}

// leaseReply decodes the script's reply to lease call q: ok and takeover
// as digits, now (8 bytes, little-endian), then the lease record, if any.
func leaseReply(q *backend.LeaseQuery, v any) (backend.LeaseResult, error) {
	s, ok := v.(string)
	if !ok || len(s) < 10 || (s[0] != '0' && s[0] != '1') || (s[1] != '0' && s[1] != '1') {
		return backend.LeaseResult{}, fmt.Errorf("unexpected reply %T %.2q", v, s)
	}
	nowMs := le64(s[2:])
	res := backend.LeaseResult{OK: s[0] == '1', Takeover: s[1] == '1', Now: msTime(q.Now, nowMs)}
	var rec any
	if len(s) > 10 {
		rec = s[10:]
	}
	var err error
	if res.Lease, err = toRecord(backend.LeaseKey(q.Resource), rec, nowMs); err != nil {
		return backend.LeaseResult{}, err
	}
	return res, nil
}
