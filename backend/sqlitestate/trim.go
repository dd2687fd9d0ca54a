package sqlitestate

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/backend"
)

// Event ids count per namespace without gaps (state_namespaces.event is the
// last one), and events only ever leave oldest first, so "the newest keep
// events" are those whose seq is above event-keep: trimming reads the
// (ns, seq) index from its start and costs what it removes, whatever the
// namespace holds.
const (
	sqlTrimEvents = `DELETE FROM state_events WHERE id IN (
		SELECT id FROM state_events
		WHERE ns = ?1 AND seq <= (SELECT event FROM state_namespaces WHERE ns = ?1) - ?2
		ORDER BY seq LIMIT ?3)`
	// sqlOverfull lists the namespaces holding events beyond keep.
	sqlOverfull = `SELECT n.ns FROM state_namespaces n WHERE EXISTS (
		SELECT 1 FROM state_events e WHERE e.ns = n.ns AND e.seq <= n.event - ?1)`
)

// trim removes up to limit of the oldest events of ns beyond the newest
// keep, in the write transaction w, and returns how many it removed.
func (w *wtx) trim(ns string, keep, limit int64) (int64, error) {
	r, err := w.tx.ExecContext(w.ctx, sqlTrimEvents, ns, keep, limit)
	if err != nil {
		return 0, fmt.Errorf("trim events of %s: %w", ns, err)
	}
	return r.RowsAffected()
}

// TrimHistory implements backend.HistoryTrimmer in one short transaction.
func (d *Driver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	var res backend.TrimResult
	err := d.batch.do(ctx, func(w *wtx) error {
		n, err := w.trim(q.NS, q.Keep, int64(q.Limit))
		res = backend.TrimResult{Events: n, More: n == int64(q.Limit)}
		return err
	})
	if err != nil {
		return backend.TrimResult{}, fmt.Errorf("sqlitestate: trim history: %w", err)
	}
	return res, nil
}

// trimAll removes, within budget, the oldest events beyond keep of every
// namespace (Sweep).
func (w *wtx) trimAll(keep, budget int64) (int64, error) {
	rows, err := w.tx.QueryContext(w.ctx, sqlOverfull, keep)
	if err != nil {
		return 0, fmt.Errorf("find namespaces over the history limit: %w", err)
	}
	var nss []string
	for rows.Next() {
		var ns string
		if err := rows.Scan(&ns); err != nil {
			rows.Close()
			return 0, err
		}
		nss = append(nss, ns)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int64
	for _, ns := range nss {
		if total >= budget {
			break
		}
		n, err := w.trim(ns, keep, budget-total)
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
