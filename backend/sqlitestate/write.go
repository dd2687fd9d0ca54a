package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

const (
	sqlCondRev = `SELECT rev FROM state_records WHERE ns = ? AND key = ? AND (expires_at IS NULL OR expires_at > ?)`
	// sqlBumpRev takes the namespace's next revision and ?2 event ids,
	// starting a new namespace's counters above the floors (schema.go).
	sqlBumpRev = `INSERT INTO state_namespaces (ns, rev, event) VALUES (?1,
			(SELECT value FROM state_meta WHERE name = 'revision') + 1,
			(SELECT value FROM state_meta WHERE name = 'event_floor') + ?2)
		ON CONFLICT (ns) DO UPDATE SET rev = rev + 1, event = event + ?2
		RETURNING rev, event`
	// sqlBumpLive does it with one primary-key update, without the floor
	// lookups, for a namespace that has its row: no row, no answer.
	sqlBumpLive = `UPDATE state_namespaces SET rev = rev + 1, event = event + ?2 WHERE ns = ?1 RETURNING rev, event`
	sqlEvent    = `INSERT INTO state_events (ns, rev, key, op, value, prev, writer, at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlEventPrev captures the live value of a record as the event's prev.
	sqlEventPrev = `INSERT INTO state_events (ns, rev, key, op, value, prev, writer, at, seq) VALUES (?1, ?2, ?3, ?4, ?5,
		(SELECT value FROM state_records WHERE ns = ?1 AND key = ?6 AND (expires_at IS NULL OR expires_at > ?8)), ?7, ?8, ?9)`
	// sqlPut keeps crev while the record is live and starts it anew otherwise.
	sqlPut = `INSERT INTO state_records (ns, key, value, writer, rev, crev, updated_at, expires_at)
		VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6, ?7)
		ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, writer = excluded.writer, rev = excluded.rev,
			crev = CASE WHEN state_records.expires_at IS NOT NULL AND state_records.expires_at <= ?8
				THEN excluded.crev ELSE state_records.crev END,
			updated_at = excluded.updated_at, expires_at = excluded.expires_at`
	// sqlAdd is sqlPut for backend.OpAdd: the stored decimal integer (0
	// when expired) plus ?3.
	sqlAdd = `INSERT INTO state_records (ns, key, value, writer, rev, crev, updated_at, expires_at)
		VALUES (?1, ?2, CAST(CAST(?3 AS INTEGER) AS BLOB), ?4, ?5, ?5, ?6, ?7)
		ON CONFLICT (ns, key) DO UPDATE SET
			value = CAST(CASE WHEN state_records.expires_at IS NOT NULL AND state_records.expires_at <= ?8
				THEN 0 ELSE CAST(state_records.value AS INTEGER) END + CAST(?3 AS INTEGER) AS BLOB),
			writer = excluded.writer, rev = excluded.rev,
			crev = CASE WHEN state_records.expires_at IS NOT NULL AND state_records.expires_at <= ?8
				THEN excluded.crev ELSE state_records.crev END,
			updated_at = excluded.updated_at, expires_at = excluded.expires_at`
	sqlDelete = `DELETE FROM state_records WHERE ns = ? AND key = ?`
)

// Each write of a batch of several runs under this savepoint (batch.go).
const (
	sqlSavepoint = `SAVEPOINT w`
	sqlRollback  = `ROLLBACK TO w`
	sqlRelease   = `RELEASE w`
)

// writeStmts are the statements prepared on the writing connection.
type writeStmts struct {
	get, condRev, bumpRev, bumpLive, event, eventPrev, put, add, del *sql.Stmt
	savepoint, rollback, release                                     *sql.Stmt
}

func (s *writeStmts) all() []*sql.Stmt {
	return []*sql.Stmt{s.get, s.condRev, s.bumpRev, s.bumpLive, s.event, s.eventPrev, s.put, s.add, s.del,
		s.savepoint, s.rollback, s.release}
}

func (s *writeStmts) prepare(ctx context.Context, db *sql.DB) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.get, sqlGet}, {&s.condRev, sqlCondRev}, {&s.bumpRev, sqlBumpRev}, {&s.bumpLive, sqlBumpLive}, {&s.event, sqlEvent},
		{&s.eventPrev, sqlEventPrev}, {&s.put, sqlPut}, {&s.add, sqlAdd}, {&s.del, sqlDelete},
		{&s.savepoint, sqlSavepoint}, {&s.rollback, sqlRollback}, {&s.release, sqlRelease},
	} {
		st, err := db.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.sql, err)
		}
		*p.dst = st
	}
	return nil
}

func (s *writeStmts) close() error {
	var errs []error
	for _, st := range s.all() {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// wtx is a write transaction with the prepared statements bound to it.
type wtx struct {
	ctx   context.Context
	tx    *sql.Tx
	s     *writeStmts
	bound map[*sql.Stmt]*sql.Stmt
}

// stmt returns st bound to the transaction, binding it once.
func (w *wtx) stmt(st *sql.Stmt) *sql.Stmt {
	if b, ok := w.bound[st]; ok {
		return b
	}
	if w.bound == nil {
		w.bound = map[*sql.Stmt]*sql.Stmt{}
	}
	b := w.tx.StmtContext(w.ctx, st)
	w.bound[st] = b
	return b
}

// apply checks txn's conditions at now and, if all hold, applies its events
// and ops. It writes nothing when a condition fails.
func (w *wtx) apply(ns string, txn *backend.Txn, now time.Time) (backend.Result, error) {
	nowMs := ms(now)
	for i, c := range txn.If {
		var cur int64
		err := w.stmt(w.s.condRev).QueryRowContext(w.ctx, ns, c.Key, nowMs).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return backend.Result{}, err
		}
		if cur != c.Revision {
			return backend.Result{Failed: i, Current: cur, Now: now}, nil
		}
	}
	res := backend.Result{Committed: true, Failed: -1, Now: now}
	if len(txn.Then) == 0 && len(txn.Events) == 0 {
		return res, nil
	}
	rev, lastEvent, err := w.bump(ns, len(txn.Events))
	if err != nil {
		return backend.Result{}, err
	}
	res.Revision = rev
	id := lastEvent - int64(len(txn.Events))
	for _, e := range txn.Events {
		id++
		at := nowMs
		if !e.Time.IsZero() {
			at = ms(e.Time)
		}
		var err error
		if e.PrevOf != "" {
			_, err = w.stmt(w.s.eventPrev).ExecContext(w.ctx, ns, res.Revision, e.Key, e.Op, nullable(e.Value), e.PrevOf, e.Writer, at, id)
		} else {
			_, err = w.stmt(w.s.event).ExecContext(w.ctx, ns, res.Revision, e.Key, e.Op, nullable(e.Value), nullable(e.Prev), e.Writer, at, id)
		}
		if err != nil {
			return backend.Result{}, fmt.Errorf("append event: %w", err)
		}
	}
	for _, op := range txn.Then {
		var err error
		switch op.Kind {
		case backend.OpPut, backend.OpAdd:
			var exp any
			if op.TTL > 0 {
				exp = ms(now.Add(op.TTL))
			}
			val := op.Value
			if val == nil {
				val = []byte{}
			}
			st := w.s.put
			if op.Kind == backend.OpAdd {
				st = w.s.add
			}
			_, err = w.stmt(st).ExecContext(w.ctx, ns, op.Key, val, op.Writer, res.Revision, ms(op.Time), exp, nowMs)
		case backend.OpDelete:
			_, err = w.stmt(w.s.del).ExecContext(w.ctx, ns, op.Key)
		default:
			err = fmt.Errorf("unknown op kind %d", op.Kind)
		}
		if err != nil {
			return backend.Result{}, fmt.Errorf("write %q: %w", op.Key, err)
		}
	}
	return res, nil
}

// bump takes namespace ns's next revision and events event ids, and
// returns the revision and the last of the ids.
func (w *wtx) bump(ns string, events int) (rev, lastEvent int64, err error) {
	err = w.stmt(w.s.bumpLive).QueryRowContext(w.ctx, ns, events).Scan(&rev, &lastEvent)
	if errors.Is(err, sql.ErrNoRows) { // the namespace's first commit
		err = w.stmt(w.s.bumpRev).QueryRowContext(w.ctx, ns, events).Scan(&rev, &lastEvent)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("next revision: %w", err)
	}
	return rev, lastEvent, nil
}

// nullable stores a nil slice as NULL and anything else as a BLOB.
func nullable(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}

// Commit implements backend.Driver.
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	now := nowOr(txn.Now)
	var res backend.Result
	err := d.batch.do(ctx, func(w *wtx) error {
		var err error
		res, err = w.apply(txn.NS, txn, now)
		return err
	})
	if err != nil {
		return backend.Result{}, fmt.Errorf("sqlitestate: commit: %w", err)
	}
	return res, nil
}

// Update implements backend.Updater: it reads, calls fn and commits in one
// write transaction.
func (d *Driver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	now := nowOr(q.Now)
	var res backend.Result
	var fnErr error
	err := d.batch.do(ctx, func(w *wtx) error {
		fnErr = nil
		recs, err := getMany(w.ctx, w.stmt(w.s.get), &backend.GetQuery{NS: q.NS, Keys: q.Keys, Now: now, IncludeExpired: q.IncludeExpired})
		if err != nil {
			return err
		}
		txn, err := fn(recs, now)
		if err != nil {
			fnErr = err
			return errRejected
		}
		if txn == nil {
			res = backend.Result{Committed: true, Failed: -1, Now: now}
			return nil
		}
		res, err = w.apply(q.NS, txn, now)
		return err
	})
	if fnErr != nil {
		return backend.Result{}, fnErr
	}
	if err != nil {
		return backend.Result{}, fmt.Errorf("sqlitestate: update: %w", err)
	}
	return res, nil
}

// errRejected marks a request whose own logic refused to write; its
// savepoint is rolled back like a failed one, but it is not a failure. A
// work returns it only before it changed anything: the batcher runs works
// without savepoints first and keeps the changes of the others (runTx).
var errRejected = errors.New("rejected by caller")
