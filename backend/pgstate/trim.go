package pgstate

import (
	"context"

	"github.com/statesidecar/state/backend"
)

// TrimHistory implements backend.HistoryTrimmer: one call of the trim
// function (see migrations/002_trim.sql), one short transaction. When
// another process (a replica) is trimming the namespace, it returns at once
// having removed nothing and without asking for more: that process is
// doing the work, and nobody waits for it.
func (d *Driver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	var trimmed bool
	var res backend.TrimResult
	err := d.pool.QueryRow(ctx, d.q.trim, q.NS, d.trimLock(q.NS), q.Keep, int32(q.Limit)).Scan(&trimmed, &res.Events)
	if err != nil {
		return backend.TrimResult{}, d.fail(ctx, "trim history", err)
	}
	res.More = trimmed && res.Events >= int64(q.Limit)
	return res, nil
}
