package sqlitestate

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/statesidecar/state/backend"
)

const recordCols = `value, writer, rev, crev, updated_at, expires_at`

const (
	sqlGet = `SELECT ` + recordCols + ` FROM state_records WHERE ns = ? AND key = ?`
	// sqlGetMany reads the records of a JSON array of keys in one statement
	// (one snapshot), a primary-key search per key.
	sqlGetMany = `SELECT key, ` + recordCols + ` FROM state_records
		WHERE ns = ?1 AND key IN (SELECT value FROM json_each(?2))`

	sqlCountBounded = `SELECT count(*) FROM state_records
		WHERE ns = ? AND key >= ? AND key < ? AND (expires_at IS NULL OR expires_at > ?)`
	sqlCountOpen = `SELECT count(*) FROM state_records
		WHERE ns = ? AND key >= ? AND (expires_at IS NULL OR expires_at > ?)`
	sqlCountEvents = `SELECT count(*) FROM state_events WHERE ns = ?`

	// An event's id is its seq, counted per namespace (schema version 2).
	eventCols       = `seq, rev, key, op, value, prev, writer, at`
	sqlHistoryAll   = `SELECT ` + eventCols + ` FROM state_events WHERE ns = ? AND seq < ? ORDER BY seq DESC LIMIT ?`
	sqlHistoryByKey = `SELECT ` + eventCols + ` FROM state_events WHERE ns = ? AND key = ? AND seq < ? ORDER BY seq DESC LIMIT ?`
)

// listSQL returns the statement List runs: records (or, keysOnly, their
// keys and revisions) of namespace ?1 from the lower bound ?2 (exclusive
// when after, else inclusive) up to the exclusive upper bound ?3 when
// bounded, live at ?4, at most ?5 of them. The lower bound is one value,
// the greater of the prefix and the cursor, so that SQLite seeks to it:
// with two lower bounds its plan uses one and walks from there.
func listSQL(keysOnly, after, bounded bool) string {
	cols := `key, ` + recordCols
	if keysOnly {
		cols = `key, rev, crev`
	}
	lo := `key >= ?2`
	if after {
		lo = `key > ?2`
	}
	hi := ``
	if bounded {
		hi = ` AND key < ?3`
	}
	return `SELECT ` + cols + ` FROM state_records WHERE ns = ?1 AND ` + lo + hi +
		` AND (expires_at IS NULL OR expires_at > ?4) ORDER BY key LIMIT ?5`
}

// readStmts are the statements prepared on the reading pool.
type readStmts struct {
	get, getMany *sql.Stmt
	// list is indexed by listSQL's arguments: keys only, after, bounded.
	list                                 [2][2][2]*sql.Stmt
	countBounded, countOpen, countEvents *sql.Stmt
	historyAll, historyByKey             *sql.Stmt
}

func (s *readStmts) close() error {
	var errs []error
	all := []*sql.Stmt{s.get, s.getMany, s.countBounded, s.countOpen, s.countEvents, s.historyAll, s.historyByKey}
	for _, a := range s.list {
		for _, b := range a {
			all = append(all, b[:]...)
		}
	}
	for _, st := range all {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

func (d *Driver) prepare(ctx context.Context) error {
	rs := &d.rs
	stmts := []struct {
		dst **sql.Stmt
		sql string
	}{
		{&rs.get, sqlGet}, {&rs.getMany, sqlGetMany},
		{&rs.countBounded, sqlCountBounded}, {&rs.countOpen, sqlCountOpen}, {&rs.countEvents, sqlCountEvents},
		{&rs.historyAll, sqlHistoryAll}, {&rs.historyByKey, sqlHistoryByKey},
	}
	for k := range 2 {
		for a := range 2 {
			for b := range 2 {
				stmts = append(stmts, struct {
					dst **sql.Stmt
					sql string
				}{&rs.list[k][a][b], listSQL(k == 1, a == 1, b == 1)})
			}
		}
	}
	for _, p := range stmts {
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
	r := backend.Record{Key: key}
	// A point read takes microseconds and never waits for a lock in SQLite
	// (busy_timeout is 0; retryBusy waits, within ctx), so it runs without
	// ctx's cancellation: with it, database/sql and the driver would each
	// start a goroutine to watch ctx, which more than doubles the read's
	// cost. Package state calls with a live ctx (see package backend), and
	// ctx bounds the waits in retryBusy.
	qctx := context.WithoutCancel(ctx)
	err := d.retryBusy(ctx, func() error { return scanRecord(d.rs.get.QueryRowContext(qctx, ns, key), &r) })
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !live(&r, nowOr(now))) {
		return backend.Record{}, backend.ErrNotFound
	}
	if err != nil {
		return backend.Record{}, fmt.Errorf("sqlitestate: get: %w", err)
	}
	return r, nil
}

// GetMany implements backend.Driver. The records are one consistent
// snapshot: read by one statement, or for a few keys (or keys that JSON
// cannot carry) in one transaction.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	var out []backend.Record
	var err error
	err = d.retryBusy(ctx, func() error {
		if keys, ok := jsonKeys(q.Keys); ok {
			out, err = d.getManyOnce(ctx, q, keys)
			return err
		}
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

// jsonKeys encodes keys as a JSON array for sqlGetMany, when there are
// enough of them for one statement to pay and JSON carries each exactly.
func jsonKeys(keys []string) ([]byte, bool) {
	if len(keys) < 4 {
		return nil, false
	}
	for _, k := range keys {
		if !utf8.ValidString(k) || strings.IndexByte(k, 0) >= 0 {
			return nil, false
		}
	}
	b, err := json.Marshal(keys)
	return b, err == nil
}

// getManyOnce reads q's keys with sqlGetMany.
func (d *Driver) getManyOnce(ctx context.Context, q *backend.GetQuery, keys []byte) ([]backend.Record, error) {
	rows, err := d.rs.getMany.QueryContext(ctx, q.NS, keys)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := make(map[string]backend.Record, len(q.Keys))
	for rows.Next() {
		var r backend.Record
		if err := scanRecord(rows, &r, &r.Key); err != nil {
			return nil, err
		}
		found[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	now := nowOr(q.Now)
	out := make([]backend.Record, len(q.Keys))
	given := make(map[string]bool, len(q.Keys))
	for i, k := range q.Keys {
		r, ok := found[k]
		switch {
		case !ok:
			r = backend.Record{Key: k}
		case !live(&r, now) && q.IncludeExpired:
			r.Expired = true
		case !live(&r, now):
			r = backend.Record{Key: k}
		}
		if given[k] { // a repeated key gets a copy of its own
			r.Value = append([]byte(nil), r.Value...)
		}
		given[k] = true
		out[i] = r
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
	lo, after := q.Prefix, false
	if q.After >= q.Prefix && q.After != "" {
		lo, after = q.After, true
	}
	end := prefixEnd(q.Prefix)
	st := d.rs.list[b2i(q.KeysOnly)][b2i(after)][b2i(end != "")]
	var out []backend.Record
	err := d.retryBusy(ctx, func() error {
		out = out[:0]
		rows, err := st.QueryContext(ctx, q.NS, lo, end, ms(nowOr(q.Now)), q.Limit)
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

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Count implements backend.Driver.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes))}
	now := ms(nowOr(q.Now))
	err := d.retryBusy(ctx, func() error {
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
	before := q.Before
	if before == 0 {
		before = math.MaxInt64
	}
	var out []backend.Event
	err := d.retryBusy(ctx, func() error {
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
