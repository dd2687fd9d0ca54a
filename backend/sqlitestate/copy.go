package sqlitestate

import (
	"context"
	"fmt"
)

// What a copy between backends (package migrate) asks of a target and a
// source beyond the Driver interface.

const (
	// sqlRaiseRev makes a namespace's last revision at least ?2, starting a
	// new namespace's counters as sqlBumpRev does (schema.go), so that the
	// next revision is above both.
	sqlRaiseRev = `INSERT INTO state_namespaces (ns, rev, event) VALUES (?1,
			max(?2, (SELECT value FROM state_meta WHERE name = 'revision')),
			(SELECT value FROM state_meta WHERE name = 'event_floor'))
		ON CONFLICT (ns) DO UPDATE SET rev = max(rev, ?2)`
	// sqlNamespaces lists the namespaces holding a record or an event.
	sqlNamespaces = `SELECT ns FROM state_namespaces n
		WHERE EXISTS (SELECT 1 FROM state_records r WHERE r.ns = n.ns)
		   OR EXISTS (SELECT 1 FROM state_events e WHERE e.ns = n.ns)
		ORDER BY ns`
)

// RaiseRevision makes the revisions namespace ns gives from now on greater
// than floor (it does nothing if they already are), so that records copied
// from another store are written at revisions above the ones they had
// there: a lease's fence and an entry's version keep growing across the
// copy. Event ids are not changed.
func (d *Driver) RaiseRevision(ctx context.Context, ns string, floor int64) error {
	err := d.batch.do(ctx, func(w *wtx) error {
		_, err := w.tx.ExecContext(w.ctx, sqlRaiseRev, ns, floor)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlitestate: raise the revision of %s: %w", ns, err)
	}
	return nil
}

// Namespaces returns the namespaces that hold a record or a history event,
// sorted.
func (d *Driver) Namespaces(ctx context.Context) ([]string, error) {
	var out []string
	err := d.retryBusy(ctx, func() error {
		out = out[:0]
		rows, err := d.r.QueryContext(ctx, sqlNamespaces)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var ns string
			if err := rows.Scan(&ns); err != nil {
				return err
			}
			out = append(out, ns)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: list namespaces: %w", err)
	}
	return out, nil
}
