package redisstate

import (
	"context"
	"fmt"
	"strings"

	"github.com/statesidecar/state/backend"
)

// Commit implements backend.Driver: conditions, writes and events in one
// script, so one round trip and atomic. A Set (backend.IntentSet) takes a
// script of its own (set.go); everything else the generic lua/commit.lua.
// The value of a run record is stored packed (runs.go).
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	if len(txn.Then) > 0 || len(txn.Events) > 0 {
		if err := d.touch(ctx, txn.NS); err != nil {
			return backend.Result{}, err
		}
	}
	if txn.Intent == backend.IntentSet && len(txn.Then) == 1 && len(txn.Events) == 1 &&
		!strings.HasPrefix(txn.Then[0].Key, backend.RunPrefix) {
		return d.set(ctx, txn)
	}
	args := make([]any, 0, 4+2*len(txn.If)+6*len(txn.Then)+7*len(txn.Events))
	args = append(args, nowArg(txn.Now), len(txn.If), len(txn.Then), len(txn.Events))
	for _, c := range txn.If {
		args = append(args, c.Key, c.Revision)
	}
	for _, op := range txn.Then {
		var kind string
		switch op.Kind {
		case backend.OpPut:
			kind = "p"
		case backend.OpDelete:
			kind = "d"
		case backend.OpAdd:
			kind = "a"
		default:
			return backend.Result{}, fmt.Errorf("redisstate: commit: unknown op kind %d", op.Kind)
		}
		val := op.Value
		if op.Kind == backend.OpPut && strings.HasPrefix(op.Key, backend.RunPrefix) {
			val = packRun(val)
		}
		args = append(args, kind, op.Key, val, op.Writer, ttlMs(op.TTL), unixMs(op.Time))
	}
	for _, e := range txn.Events {
		if strings.HasPrefix(e.PrevOf, backend.RunPrefix) {
			// The script would copy the packed value into the event.
			return backend.Result{}, fmt.Errorf("redisstate: commit: an event's PrevOf names run record %q, which is stored packed", e.PrevOf)
		}
		t := ""
		if !e.Time.IsZero() {
			t = itoa(e.Time.UnixMilli())
		}
		args = append(args, e.Key, e.Op, e.Value, e.Prev, e.PrevOf, e.Writer, t)
	}
	v, err := commitScript.Run(ctx, d.rdb, []string{d.base(txn.NS)}, args...).Result()
	if err != nil {
		return backend.Result{}, d.fail(ctx, "commit", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 5 {
		return backend.Result{}, d.fail(ctx, "commit", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	var n [5]int64
	for i := range n {
		n[i], _ = asInt(s[i])
	}
	return backend.Result{Committed: n[0] == 1, Revision: n[1], Failed: int(n[2]), Current: n[3],
		Now: msTime(txn.Now, n[4])}, nil
}

// Reset implements backend.Driver in one script. It takes time in
// proportion to what the namespace holds, during which Redis serves no one
// else: it is meant for tests and rare administrative wipes.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	args := make([]any, 0, 2*len(q.CountPrefixes))
	for _, p := range q.CountPrefixes {
		lo, hi := lexRange(p)
		args = append(args, lo, hi)
	}
	v, err := resetScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, args...).Result()
	if err != nil {
		return backend.ResetResult{}, d.fail(ctx, "reset", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 2 {
		return backend.ResetResult{}, d.fail(ctx, "reset", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	var r backend.ResetResult
	r.Records, _ = asInt(s[0])
	r.Events, _ = asInt(s[1])
	return r, nil
}
