package redisstate

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// set commits a Set (backend.IntentSet, whose shape the contract gives),
// in one script (lua/set.lua).
func (d *Driver) set(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	op, e := &txn.Then[0], &txn.Events[0]
	cond := ""
	if len(txn.If) == 1 {
		cond = itoa(txn.If[0].Revision)
	}
	v, err := setScript.Run(ctx, d.rdb, []string{d.base(txn.NS)}, nowArg(txn.Now), op.Key, op.Value, op.Writer,
		ttlMs(op.TTL), unixMs(op.Time), cond, e.Key, e.Op).Result()
	if err != nil {
		return backend.Result{}, d.fail(ctx, "commit", err)
	}
	if s, ok := v.(string); ok && len(s) == 16 { // committed: revision and now
		return backend.Result{Committed: true, Revision: le64(s), Failed: -1, Now: msTime(txn.Now, le64(s[8:]))}, nil
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 2 {
		return backend.Result{}, d.fail(ctx, "commit", fmt.Errorf("unexpected reply %T (%d elements)", v, len(s)))
	}
	cur, _ := asInt(s[0])
	now, _ := asInt(s[1])
	return backend.Result{Failed: 0, Current: cur, Now: msTime(txn.Now, now)}, nil
}
