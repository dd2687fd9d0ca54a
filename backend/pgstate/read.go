package pgstate

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state/backend"
)

// scanRecord reads the columns of recordCols into r, after extra.
func scanRecord(row pgx.Row, r *backend.Record, extra ...any) error {
	var upd int64
	var exp *int64
	if err := row.Scan(append(extra, &r.Value, &r.Writer, &r.Revision, &r.CreateRevision, &upd, &exp)...); err != nil {
		return err
	}
	r.UpdatedAt = msTime(upd)
	if exp != nil {
		r.ExpiresAt = msTime(*exp)
	}
	return nil
}

// Get implements backend.Driver: one SELECT by primary key that also
// decides liveness, at now or at the database's clock.
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	if d.counter(key) {
		recs, err := d.readCounters(ctx, &backend.GetQuery{NS: ns, Keys: []string{key}, Now: now})
		if err != nil {
			return backend.Record{}, d.fail(ctx, "get", err)
		}
		if recs[0].Revision == 0 {
			return backend.Record{}, backend.ErrNotFound
		}
		return recs[0], nil
	}
	r := backend.Record{Key: key}
	err := scanRecord(d.pool.QueryRow(ctx, d.q.get, ns, []byte(key), nowArg(now)), &r)
	if errors.Is(err, pgx.ErrNoRows) {
		return backend.Record{}, backend.ErrNotFound
	}
	if err != nil {
		return backend.Record{}, d.fail(ctx, "get", err)
	}
	return r, nil
}

// GetMany implements backend.Driver: one statement, so the records are one
// consistent snapshot.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	if slices.ContainsFunc(q.Keys, d.counter) {
		out, err := d.readCounters(ctx, q)
		if err != nil {
			return nil, d.fail(ctx, "get many", err)
		}
		return out, nil
	}
	keys := make([][]byte, len(q.Keys))
	for i, k := range q.Keys {
		keys[i] = []byte(k)
	}
	rows, err := d.pool.Query(ctx, d.q.getMany, q.NS, keys, nowArg(q.Now))
	if err != nil {
		return nil, d.fail(ctx, "get many", err)
	}
	out, _, err := scanRead(rows, q.Keys, q.IncludeExpired)
	if err != nil {
		return nil, d.fail(ctx, "get many", err)
	}
	return out, nil
}

// readCounters reads q's keys, some of them counters, in one call of the
// read_counters function: it takes the counters' locks exclusively, so that
// it waits for the adds in flight (each holds its counter's lock shared)
// and reads each counter's exact sum. A reader locks only counters, in
// the writers' order, but an Update locks the keys it writes after those it
// read: when the database breaks the rare deadlock by failing the read, it
// reads again.
func (d *Driver) readCounters(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	keys := make([][]byte, len(q.Keys))
	var counters []string
	for i, k := range q.Keys {
		keys[i] = []byte(k)
		if d.counter(k) {
			counters = append(counters, k)
		}
	}
	locks := d.locksOf(q.NS, counters...)
	excl := len(locks) > maxKeyLocks
	if excl {
		locks = nil
	}
	for {
		rows, err := d.pool.Query(ctx, d.q.readCounters, q.NS, nowArg(q.Now), d.nsLock(q.NS), excl, locks, keys)
		if err == nil {
			var out []backend.Record
			out, _, err = scanRead(rows, q.Keys, q.IncludeExpired)
			if err == nil {
				return out, nil
			}
		}
		if !deadlocked(ctx, err) {
			return nil, err
		}
	}
}

// scanRead reads the rows of getMany or lock_read: one per key, in order,
// each ending with the time the read was evaluated at (Unix ms), which it
// returns too.
func scanRead(rows pgx.Rows, keys []string, includeExpired bool) ([]backend.Record, int64, error) {
	defer rows.Close()
	out := make([]backend.Record, 0, len(keys))
	var nowMs int64
	for rows.Next() {
		var key, value []byte
		var writer *string
		var rev, crev, upd, exp *int64
		if err := rows.Scan(&key, &value, &writer, &rev, &crev, &upd, &exp, &nowMs); err != nil {
			return nil, 0, err
		}
		r := backend.Record{Key: keys[len(out)]}
		if rev != nil {
			r.Value, r.Writer, r.Revision, r.CreateRevision, r.UpdatedAt = value, *writer, *rev, *crev, msTime(*upd)
			if exp != nil {
				r.ExpiresAt = msTime(*exp)
				if *exp <= nowMs {
					r.Expired = true
				}
			}
			if r.Expired && !includeExpired {
				r = backend.Record{Key: r.Key}
			}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(out) != len(keys) {
		return nil, 0, errors.New("the database returned fewer rows than keys")
	}
	return out, nowMs, nil
}

// List implements backend.Driver: one range scan of the primary key,
// bounded below by the greater of the prefix and the cursor and above by
// the end of the prefix.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	after, lower := 0, q.Prefix
	if q.After != "" && q.After >= q.Prefix {
		after, lower = 1, q.After
	}
	end, bounded := prefixEnd(q.Prefix)
	keysOnly := 0
	if q.KeysOnly {
		keysOnly = 1
	}
	if d.countersIn(lower, end, bounded) {
		return d.listCounted(ctx, q, lower, after == 1, end)
	}
	args := []any{q.NS, []byte(lower), nowArg(q.Now), q.Limit}
	b := 0
	if bounded {
		b = 1
		args = append(args, end)
	}
	rows, err := d.pool.Query(ctx, d.q.list[after][b][keysOnly], args...)
	return d.scanList(ctx, rows, err, q.KeysOnly, q.KeysOnly)
}

// scanList reads the records of a listing query: rows of keys, revisions
// and create revisions only when short, else whole records, kept whole
// unless keysOnly.
func (d *Driver) scanList(ctx context.Context, rows pgx.Rows, err error, short, keysOnly bool) ([]backend.Record, error) {
	if err != nil {
		return nil, d.fail(ctx, "list", err)
	}
	defer rows.Close()
	var out []backend.Record
	for rows.Next() {
		var r backend.Record
		var key []byte
		if short {
			err = rows.Scan(&key, &r.Revision, &r.CreateRevision)
		} else {
			err = scanRecord(rows, &r, &key)
		}
		if err != nil {
			return nil, d.fail(ctx, "list", err)
		}
		r.Key = string(key)
		if keysOnly && !short {
			r = backend.Record{Key: r.Key, Revision: r.Revision, CreateRevision: r.CreateRevision}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(ctx, "list", err)
	}
	return out, nil
}

// countersIn reports whether the keys from lower up to end (or without an
// upper bound) may include counters.
func (d *Driver) countersIn(lower string, end []byte, bounded bool) bool {
	cend, cbounded := prefixEnd(d.counters)
	return (!cbounded || lower < string(cend)) && (!bounded || string(end) > d.counters)
}

// listCounted is List of a range that may hold counters: one call of the
// list_counted function, which takes the namespace's lock exclusively (it
// cannot know the counters' locks beforehand), so that no add is in flight,
// and reads each counter's exact sum. Package state never lists counters;
// this keeps List exact for any caller that does.
func (d *Driver) listCounted(ctx context.Context, q *backend.ListQuery, lower string, after bool, end []byte) ([]backend.Record, error) {
	rows, err := d.pool.Query(ctx, d.q.listCounted, q.NS, d.nsLock(q.NS), []byte(lower), after, end, nowArg(q.Now), q.Limit)
	return d.scanList(ctx, rows, err, false, q.KeysOnly)
}

// Count implements backend.Driver in one statement.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	sql, args := d.q.count(q.NS, nowArg(q.Now), q.Prefixes)
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes))}
	dst := make([]any, 0, len(q.Prefixes)+1)
	for i := range c.Prefixes {
		dst = append(dst, &c.Prefixes[i])
	}
	if err := d.pool.QueryRow(ctx, sql, args...).Scan(append(dst, &c.Events)...); err != nil {
		return backend.Counts{}, d.fail(ctx, "count", err)
	}
	return c, nil
}

// History implements backend.Driver: one range scan of the events' primary
// key, or of their index by key. The namespace's history as a whole stops
// at its settled horizon (see the history function in
// migrations/001_init.sql): an event appears once every event before it
// has committed or rolled back, so that package state's Watch and waiters,
// which follow history with a cursor, never pass one still in flight.
// Writes in flight are short (one function call, or the commit of an
// Update), so an event is held back for little longer than the write
// before it takes.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	before := q.Before
	if before == 0 {
		before = math.MaxInt64
	}
	var rows pgx.Rows
	var err error
	if q.Key != "" {
		rows, err = d.pool.Query(ctx, d.q.historyByKey, q.NS, []byte(q.Key), before, q.Limit)
	} else {
		rows, err = d.pool.Query(ctx, d.q.historyAll, q.NS, d.nsLock(q.NS), before, q.Limit)
	}
	if err != nil {
		return nil, d.fail(ctx, "history", err)
	}
	defer rows.Close()
	var out []backend.Event
	for rows.Next() {
		var e backend.Event
		var key []byte
		var at int64
		if err := rows.Scan(&e.ID, &e.Revision, &key, &e.Op, &e.Value, &e.Prev, &e.Writer, &at); err != nil {
			return nil, d.fail(ctx, "history", err)
		}
		e.Key, e.Time = string(key), msTime(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, d.fail(ctx, "history", err)
	}
	return out, nil
}

// recordRow receives a record from a function that may return none (NULL
// columns): lease and claim.
type recordRow struct {
	value               []byte
	writer              *string
	rev, crev, upd, exp *int64
}

// record returns the record received, with key, or an absent record when
// none was.
func (r *recordRow) record(key string) backend.Record {
	if r.rev == nil {
		return backend.Record{Key: key}
	}
	rec := backend.Record{Key: key, Value: r.value, Writer: *r.writer, Revision: *r.rev, CreateRevision: *r.crev,
		UpdatedAt: msTime(*r.upd)}
	if r.exp != nil {
		rec.ExpiresAt = msTime(*r.exp)
	}
	return rec
}
