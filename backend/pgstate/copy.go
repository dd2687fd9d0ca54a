package pgstate

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What a copy between backends (package migrate) asks of a target and a
// source beyond the Driver interface.

// RaiseRevision makes the revisions namespace ns gives from now on greater
// than floor (it does nothing if they already are), so that records copied
// from another store are written at revisions above the ones they had
// there: a lease's fence and an entry's version keep growing across the
// copy. (Revisions here stay at or above the commits' clock in
// microseconds, so this matters only for a source whose revisions ran
// ahead of that clock.) It moves the namespace's sequence under the lock
// that next_rev takes to move it.
func (d *Driver) RaiseRevision(ctx context.Context, ns string, floor int64) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var seq string
		if err := tx.QueryRow(ctx, `SELECT `+d.q.s+`.create_ns($1::text, $2::bigint)::text`, ns, floor+1).Scan(&seq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('pgstate reseed ' || $1::regclass::oid::text, 0))`, seq); err != nil {
			return err
		}
		// last_value is the start value of a sequence never drawn from, so
		// a newer sequence that starts above floor is left alone.
		_, err := tx.Exec(ctx, `SELECT setval($1::regclass, $2::bigint) FROM `+seq+` WHERE last_value < $2::bigint`, seq, floor)
		return err
	})
	if err != nil {
		return d.fail(ctx, "raise the revision of "+ns, err)
	}
	return nil
}

// Namespaces returns the namespaces that were ever written to, sorted;
// one that was reset since is among them, empty.
func (d *Driver) Namespaces(ctx context.Context) ([]string, error) {
	rows, err := d.pool.Query(ctx, `SELECT ns FROM `+d.q.s+`.namespaces ORDER BY ns`)
	if err != nil {
		return nil, d.fail(ctx, "list namespaces", err)
	}
	nss, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, d.fail(ctx, "list namespaces", fmt.Errorf("read: %w", err))
	}
	return nss, nil
}
