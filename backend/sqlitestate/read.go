package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/statesidecar/state/backend"
)

const recordCols = `value, writer, rev, crev, updated_at, expires_at`

const (
	sqlGet = `SELECT ` + recordCols + ` FROM state_records WHERE ns = ? AND key = ?`

	sqlListBounded = `SELECT key, ` + recordCols + ` FROM state_records
		WHERE ns = ?1 AND key > ?2 AND key >= ?3 AND key < ?4 AND (expires_at IS NULL OR expires_at > ?5)
		ORDER BY key LIMIT ?6`
	sqlListOpen = `SELECT key, ` + recordCols + ` FROM state_records
		WHERE ns = ?1 AND key > ?2 AND key >= ?3 AND (expires_at IS NULL OR expires_at > ?5) AND ?4 = ''
		ORDER BY key LIMIT ?6`
	sqlKeysBounded = `SELECT key, rev, crev FROM state_records
		WHERE ns = ?1 AND key > ?2 AND key >= ?3 AND key < ?4 AND (expires_at IS NULL OR expires_at > ?5)
		ORDER BY key LIMIT ?6`
	sqlKeysOpen = `SELECT key, rev, crev FROM state_records
		WHERE ns = ?1 AND key > ?2 AND key >= ?3 AND (expires_at IS NULL OR expires_at > ?5) AND ?4 = ''
		ORDER BY key LIMIT ?6`

	sqlCountBounded = `SELECT count(*) FROM state_records
		WHERE ns = ? AND key >= ? AND key < ? AND (expires_at IS NULL OR expires_at > ?)`
	sqlCountOpen = `SELECT count(*) FROM state_records
		WHERE ns = ? AND key >= ? AND (expires_at IS NULL OR expires_at > ?)`
	sqlCountEvents = `SELECT count(*) FROM state_events WHERE ns = ?`

	eventCols       = `id, rev, key, op, value, prev, writer, at`
	sqlHistoryAll   = `SELECT ` + eventCols + ` FROM state_events WHERE ns = ? AND id < ? ORDER BY id DESC LIMIT ?`
	sqlHistoryByKey = `SELECT ` + eventCols + ` FROM state_events WHERE ns = ? AND key = ? AND id < ? ORDER BY id DESC LIMIT ?`
)

// readStmts are the statements prepared on the reading pool.
type readStmts struct {
	get, listBounded, listOpen, keysBounded, keysOpen *sql.Stmt
	countBounded, countOpen, countEvents              *sql.Stmt
	historyAll, historyByKey                          *sql.Stmt
}

func (s *readStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.get, s.listBounded, s.listOpen, s.keysBounded, s.keysOpen,
		s.countBounded, s.countOpen, s.countEvents, s.historyAll, s.historyByKey} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) prepare(ctx context.Context) error {
	rs := &d.rs
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&rs.get, sqlGet}, {&rs.listBounded, sqlListBounded}, {&rs.listOpen, sqlListOpen},
		{&rs.keysBounded, sqlKeysBounded}, {&rs.keysOpen, sqlKeysOpen},
		{&rs.countBounded, sqlCountBounded}, {&rs.countOpen, sqlCountOpen}, {&rs.countEvents, sqlCountEvents},
		{&rs.historyAll, sqlHistoryAll}, {&rs.historyByKey, sqlHistoryByKey},
	} {
		st, err := d.r.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = st
	}
	return d.ws.prepare(ctx, d.w)
}

// scanRecord reads the recordCols of one row into r.
func scanRecord(sc interface{ Scan(...any) error }, r *backend.Record, extra ...any) error {
	var exp sql.NullInt64
	var upd int64
	dst := append(extra, &r.Value, &r.Writer, &r.Revision, &r.CreateRevision, &upd, &exp)
	if err := sc.Scan(dst...); err != nil {
		return err
	}
	r.UpdatedAt = fromMs(upd)
	if exp.Valid {
		r.ExpiresAt = fromMs(exp.Int64)
	}
	return nil
}

// live reports whether r is live at now.
func live(r *backend.Record, now time.Time) bool {
	return r.ExpiresAt.IsZero() || r.ExpiresAt.After(now)
}

// Get implements backend.Driver.
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return backend.Record{}, err
	}
	defer done()
	r := backend.Record{Key: key}
	err = retryBusy(ctx, func() error { return scanRecord(d.rs.get.QueryRowContext(ctx, ns, key), &r) })
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !live(&r, nowOr(now))) {
		return backend.Record{}, backend.ErrNotFound
	}
	if err != nil {
		return backend.Record{}, fmt.Errorf("sqlitestate: get: %w", err)
	}
	return r, nil
}

// GetMany implements backend.Driver. It reads in one transaction, so the
// records are a consistent snapshot.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []backend.Record
	err = retryBusy(ctx, func() error {
		tx, err := d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		out, err = getMany(ctx, tx.StmtContext(ctx, d.rs.get), q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: get many: %w", err)
	}
	return out, nil
}

// getMany reads q's keys with the get statement st.
func getMany(ctx context.Context, st *sql.Stmt, q *backend.GetQuery) ([]backend.Record, error) {
	now := nowOr(q.Now)
	out := make([]backend.Record, len(q.Keys))
	for i, k := range q.Keys {
		r := backend.Record{Key: k}
		err := scanRecord(st.QueryRowContext(ctx, q.NS, k), &r)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			r = backend.Record{Key: k}
		case err != nil:
			return nil, err
		case !live(&r, now) && q.IncludeExpired:
			r.Expired = true
		case !live(&r, now):
			r = backend.Record{Key: k}
		}
		out[i] = r
	}
	return out, nil
}

// List implements backend.Driver.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	end := prefixEnd(q.Prefix)
	var st *sql.Stmt
	switch {
	case q.KeysOnly && end != "":
		st = d.rs.keysBounded
	case q.KeysOnly:
		st = d.rs.keysOpen
	case end != "":
		st = d.rs.listBounded
	default:
		st = d.rs.listOpen
	}
	var out []backend.Record
	err = retryBusy(ctx, func() error {
		out = out[:0]
		rows, err := st.QueryContext(ctx, q.NS, q.After, q.Prefix, end, ms(nowOr(q.Now)), q.Limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r backend.Record
			if q.KeysOnly {
				err = rows.Scan(&r.Key, &r.Revision, &r.CreateRevision)
			} else {
				err = scanRecord(rows, &r, &r.Key)
			}
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: list: %w", err)
	}
	return out, nil
}

// Count implements backend.Driver.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return backend.Counts{}, err
	}
	defer done()
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes))}
	now := ms(nowOr(q.Now))
	err = retryBusy(ctx, func() error {
		tx, err := d.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for i, p := range q.Prefixes {
			var row *sql.Row
			if end := prefixEnd(p); end != "" {
				row = tx.StmtContext(ctx, d.rs.countBounded).QueryRowContext(ctx, q.NS, p, end, now)
			} else {
				row = tx.StmtContext(ctx, d.rs.countOpen).QueryRowContext(ctx, q.NS, p, now)
			}
			if err := row.Scan(&c.Prefixes[i]); err != nil {
				return err
			}
		}
		return tx.StmtContext(ctx, d.rs.countEvents).QueryRowContext(ctx, q.NS).Scan(&c.Events)
	})
	if err != nil {
		return backend.Counts{}, fmt.Errorf("sqlitestate: count: %w", err)
	}
	return c, nil
}

// History implements backend.Driver.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	done, err := d.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	before := q.Before
	if before == 0 {
		before = math.MaxInt64
	}
	var out []backend.Event
	err = retryBusy(ctx, func() error {
		out = out[:0]
		var rows *sql.Rows
		var err error
		if q.Key != "" {
			rows, err = d.rs.historyByKey.QueryContext(ctx, q.NS, q.Key, before, q.Limit)
		} else {
			rows, err = d.rs.historyAll.QueryContext(ctx, q.NS, before, q.Limit)
		}
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var e backend.Event
			var at int64
			if err := rows.Scan(&e.ID, &e.Revision, &e.Key, &e.Op, &e.Value, &e.Prev, &e.Writer, &at); err != nil {
				return err
			}
			e.Time = fromMs(at)
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestate: history: %w", err)
	}
	return out, nil
}
