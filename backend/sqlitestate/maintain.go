package sqlitestate

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// Reset implements backend.Driver: one transaction deletes every record and
// event of the namespace. The revision counter and event ids live on.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	var res backend.ResetResult
	err := d.batch.do(ctx, func(w *wtx) error {
		res = backend.ResetResult{}
		for _, p := range q.CountPrefixes {
			var n int64
			var err error
			if end := prefixEnd(p); end != "" {
				err = w.tx.QueryRowContext(w.ctx, `SELECT count(*) FROM state_records WHERE ns = ? AND key >= ? AND key < ?`, q.NS, p, end).Scan(&n)
			} else {
				err = w.tx.QueryRowContext(w.ctx, `SELECT count(*) FROM state_records WHERE ns = ? AND key >= ?`, q.NS, p).Scan(&n)
			}
			if err != nil {
				return err
			}
			res.Records += n
		}
		if _, err := w.tx.ExecContext(w.ctx, `DELETE FROM state_records WHERE ns = ?`, q.NS); err != nil {
			return err
		}
		r, err := w.tx.ExecContext(w.ctx, `DELETE FROM state_events WHERE ns = ?`, q.NS)
		if err != nil {
			return err
		}
		res.Events, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return backend.ResetResult{}, fmt.Errorf("sqlitestate: reset: %w", err)
	}
	return res, nil
}

// Sweep implements backend.Sweeper. Each call is one short transaction that
// deletes at most q.Limit expired records and q.Limit old events.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	now := nowOr(q.Now)
	var res backend.SweepResult
	err := d.batch.do(ctx, func(w *wtx) error {
		res = backend.SweepResult{}
		r, err := w.tx.ExecContext(w.ctx, `DELETE FROM state_records WHERE (ns, key) IN (
			SELECT ns, key FROM state_records WHERE expires_at <= ? LIMIT ?)`, ms(now.Add(-q.Grace)), q.Limit)
		if err != nil {
			return fmt.Errorf("expired records: %w", err)
		}
		if res.Records, err = r.RowsAffected(); err != nil {
			return err
		}
		budget := int64(q.Limit)
		if q.HistoryMaxAge > 0 {
			// Events are appended in time order, so the old ones are the
			// first ids: walk from the oldest and stop at the first young
			// one, as the Redis driver does, at the cost of the events
			// removed (there is no index of events by time to keep up).
			r, err := w.tx.ExecContext(w.ctx, `DELETE FROM state_events WHERE id IN (
				SELECT id FROM state_events WHERE id < coalesce(
					(SELECT min(id) FROM (SELECT id, at FROM state_events ORDER BY id LIMIT ?2) WHERE at >= ?1),
					(SELECT max(id) + 1 FROM (SELECT id FROM state_events ORDER BY id LIMIT ?2)))
				ORDER BY id LIMIT ?2)`, ms(now.Add(-q.HistoryMaxAge)), budget)
			if err != nil {
				return fmt.Errorf("old events: %w", err)
			}
			n, _ := r.RowsAffected()
			res.Events += n
			budget -= n
		}
		if q.HistoryMaxEvents > 0 && budget > 0 {
			n, err := w.trimAll(q.HistoryMaxEvents, budget)
			if err != nil {
				return err
			}
			res.Events += n
			budget -= n
		}
		res.More = res.Records == int64(q.Limit) || budget <= 0
		return nil
	})
	if err != nil {
		return backend.SweepResult{}, fmt.Errorf("sqlitestate: sweep: %w", err)
	}
	return res, nil
}
