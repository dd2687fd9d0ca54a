package redisstate

import (
	"bytes"
	"context"
	"fmt"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// isSet reports whether txn has the shape lua/set.lua commits: one put and
// one event of it (same value and writer, its previous value the record's,
// its time the commit's), under at most one condition, on the put's key.
// That is package state's Set, the commonest write by far.
func isSet(txn *backend.Txn) bool {
	if len(txn.Then) != 1 || len(txn.Events) != 1 || len(txn.If) > 1 {
		return false
	}
	op, e := &txn.Then[0], &txn.Events[0]
	return op.Kind == backend.OpPut && e.PrevOf == op.Key && e.Prev == nil && e.Time.IsZero() &&
		e.Writer == op.Writer && bytes.Equal(e.Value, op.Value) && (len(txn.If) == 0 || txn.If[0].Key == op.Key)
}

// set commits a txn for which isSet holds, in one script (lua/set.lua).
func (d *Driver) set(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	op, e := &txn.Then[0], &txn.Events[0]
	cond := ""
	if len(txn.If) == 1 {
		cond = itoa(txn.If[0].Revision)
	}
	v, err := setScript.Run(ctx, d.rdb, []string{d.base(txn.NS)}, nowArg(txn.Now), op.Key, op.Value, op.Writer,
		ttlMs(op.TTL), layout.Ms(op.Time), cond, e.Key, e.Op).Result()
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
