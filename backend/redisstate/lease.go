package redisstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// Lease implements backend.Leaser: one script that reads the lease, decides
// as state.Store.TryAcquireLease, RenewLease and ReleaseLease do, and
// writes the lease and its history event (lua/lease.lua).
func (d *Driver) Lease(ctx context.Context, q *backend.LeaseQuery) (backend.LeaseResult, error) {
	if q.Action < backend.LeaseAcquire || q.Action > backend.LeaseRelease {
		return backend.LeaseResult{}, fmt.Errorf("redisstate: lease: unknown action %d", q.Action)
	}
	if err := d.touch(ctx, q.NS); err != nil {
		return backend.LeaseResult{}, err
	}
	holder, err := json.Marshal(q.Holder)
	if err != nil {
		return backend.LeaseResult{}, fmt.Errorf("redisstate: lease: %w", err)
	}
	key := backend.LeaseKey(q.Resource)
	v, err := leaseScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, nowArg(q.Now), int(q.Action), q.Resource,
		q.Holder, ttlMs(q.TTL), key, holder).Result()
	if err != nil {
		return backend.LeaseResult{}, d.fail(ctx, "lease", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 4 {
		return backend.LeaseResult{}, d.fail(ctx, "lease", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	ok, _ := asInt(s[0])
	nowMs, _ := asInt(s[1])
	takeover, _ := asInt(s[2])
	res := backend.LeaseResult{OK: ok == 1, Takeover: takeover == 1, Now: msTime(q.Now, nowMs)}
	if res.Lease, err = toRecord(key, s[3], nowMs); err != nil {
		return backend.LeaseResult{}, d.fail(ctx, "lease", err)
	}
	return res, nil
}
