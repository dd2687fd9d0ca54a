package redisstate

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// defaultSweepLimit bounds a Sweep whose query sets no limit.
const defaultSweepLimit = 500

// Sweep implements backend.Sweeper. It visits every namespace of the
// driver's prefix that was ever written to (the registry set), one script
// per namespace, and stops when q.Limit records or q.Limit events have been
// removed in total. The registry is read with SSCAN, a page at a time.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	limit := int64(q.Limit)
	if limit <= 0 {
		limit = defaultSweepLimit
	}
	var res backend.SweepResult
	var cursor uint64
	for {
		nss, next, err := d.rdb.SScan(ctx, d.registry, cursor, "", 100).Result()
		if err != nil {
			return res, d.fail(ctx, "sweep", err)
		}
		for _, ns := range nss {
			rl, el := limit-res.Records, limit-res.Events
			if rl <= 0 && el <= 0 {
				res.More = true
				return res, nil
			}
			if err := d.sweepNS(ctx, ns, q, max(rl, 0), max(el, 0), &res); err != nil {
				return res, err
			}
		}
		if next == 0 {
			return res, nil
		}
		cursor = next
	}
}

// sweepNS sweeps one namespace, adding what it removed to res.
func (d *Driver) sweepNS(ctx context.Context, ns string, q *backend.SweepQuery, rl, el int64, res *backend.SweepResult) error {
	v, err := sweepScript.Run(ctx, d.rdb, []string{d.base(ns)}, nowArg(q.Now), ttlMs(q.Grace), rl, el,
		ttlMs(q.HistoryMaxAge), q.HistoryMaxEvents).Result()
	if err != nil {
		return d.fail(ctx, "sweep "+ns, err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 3 {
		return d.fail(ctx, "sweep "+ns, fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	recs, _ := asInt(s[0])
	evs, _ := asInt(s[1])
	more, _ := asInt(s[2])
	res.Records += recs
	res.Events += evs
	res.More = res.More || more == 1
	return nil
}

// TrimHistory implements backend.HistoryTrimmer: one script removes the
// oldest events of q.NS beyond q.Keep, at most q.Limit of them.
func (d *Driver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	v, err := trimScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, q.Keep, q.Limit).Result()
	if err != nil {
		return backend.TrimResult{}, d.fail(ctx, "trim history", err)
	}
	s, err := asSlice(v)
	if err != nil || len(s) != 2 {
		return backend.TrimResult{}, d.fail(ctx, "trim history", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	n, _ := asInt(s[0])
	more, _ := asInt(s[1])
	return backend.TrimResult{Events: n, More: more == 1}, nil
}
