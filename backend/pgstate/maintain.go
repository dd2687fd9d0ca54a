package pgstate

import (
	"context"
	"time"

	"github.com/statesidecar/state/backend"
)

// Reset implements backend.Driver in one call of the reset function, which
// waits for the namespace's writes in flight and holds off new ones while it
// deletes. It takes time in proportion to what the namespace holds: it is
// meant for tests and rare administrative wipes.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	los, his := make([][]byte, len(q.CountPrefixes)), make([][]byte, len(q.CountPrefixes))
	for i, p := range q.CountPrefixes {
		los[i] = []byte(p)
		his[i], _ = prefixEnd(p)
	}
	var r backend.ResetResult
	if err := d.pool.QueryRow(ctx, d.q.reset, q.NS, d.nsLock(q.NS), los, his).Scan(&r.Records, &r.Events); err != nil {
		return backend.ResetResult{}, d.fail(ctx, "reset", err)
	}
	return r, nil
}

// Sweep implements backend.Sweeper: one short transaction that deletes at
// most q.Limit expired records and q.Limit old events, in every namespace of
// the schema. When another process (a replica) is sweeping the schema, it
// returns at once having done nothing, and without asking for more: one
// sweeper at a time is enough, and nobody waits for it.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	var swept bool
	var r backend.SweepResult
	err := d.pool.QueryRow(ctx, d.q.sweep, d.sweepLock(), nowArg(q.Now), q.Grace.Milliseconds(), int32(q.Limit),
		q.HistoryMaxAge.Milliseconds(), q.HistoryMaxEvents).Scan(&swept, &r.Records, &r.Events, &r.More)
	if err != nil {
		return backend.SweepResult{}, d.fail(ctx, "sweep", err)
	}
	return r, nil
}

// ServerTime implements backend.ServerClock: the database's clock.
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := d.pool.QueryRow(ctx, d.q.serverTime).Scan(&ms); err != nil {
		return time.Time{}, d.fail(ctx, "time", err)
	}
	return msTime(ms), nil
}
