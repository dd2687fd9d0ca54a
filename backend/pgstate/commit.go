package pgstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
)

// maxKeyLocks bounds the advisory locks one write takes, one per key: a
// write touching more keys (a large batch) takes its namespace's lock
// exclusively instead, so that no write can exhaust the server's lock table
// (max_locks_per_transaction).
const maxKeyLocks = 64

// Commit implements backend.Driver: one call of the commit function (see
// migrations/004_run_columns.sql), so one round trip in one transaction. A
// Set (backend.IntentSet) takes the set function instead, unless its key is
// a counter.
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	if txn.Intent == backend.IntentSet && len(txn.Then) == 1 && len(txn.Events) == 1 && !d.counter(txn.Then[0].Key) {
		return d.set(ctx, txn)
	}
	args, err := d.commitArgs(txn, nowArg(txn.Now), false)
	if err != nil {
		return backend.Result{}, fmt.Errorf("pgstate: commit: %w", err)
	}
	res, err := scanCommit(d.pool.QueryRow(ctx, d.q.commit, args...), txn.Now)
	if err != nil {
		return backend.Result{}, d.fail(ctx, "commit", err)
	}
	return res, nil
}

// set commits a Set (backend.IntentSet, whose shape the contract gives)
// with the set function. Sets made at the same moment share a round trip
// and a transaction (see batcher).
func (d *Driver) set(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	op, e := &txn.Then[0], &txn.Events[0]
	var cond any
	if len(txn.If) == 1 {
		cond = txn.If[0].Revision
	}
	var at int64
	if !op.Time.IsZero() {
		at = op.Time.UnixMilli()
	}
	val := op.Value
	if val == nil {
		val = []byte{}
	}
	lock := d.lockKey(txn.NS, op.Key)
	out, err := d.sets.do(ctx, txn.NS, lock, []any{txn.NS, nowArg(txn.Now), d.nsLock(txn.NS), lock,
		[]byte(op.Key), val, op.Writer, ttlMs(op.TTL), at, cond, []byte(e.Key), e.Op})
	if err != nil {
		return backend.Result{}, d.fail(ctx, "commit", err)
	}
	res := backend.Result{Committed: out.committed, Revision: out.rev, Failed: -1, Now: timeOf(txn.Now, out.nowMs)}
	if !res.Committed {
		res.Failed, res.Current = 0, out.cur
	}
	return res, nil
}

// setOut is the set function's answer.
type setOut struct {
	committed       bool
	rev, cur, nowMs int64
}

// readSet reads the set function's answer.
func readSet(row pgx.Row) (setOut, error) {
	var o setOut
	err := row.Scan(&o.committed, &o.rev, &o.cur, &o.nowMs)
	return o, err
}

func scanCommit(row pgx.Row, given time.Time) (backend.Result, error) {
	var res backend.Result
	var failed int32
	var nowMs int64
	if err := row.Scan(&res.Committed, &res.Revision, &failed, &res.Current, &nowMs); err != nil {
		return backend.Result{}, err
	}
	res.Failed, res.Now = int(failed), timeOf(given, nowMs)
	return res, nil
}

// locksOf returns the advisory locks of keys in namespace ns, sorted and
// without repeats: every writer takes its locks in this one order, so no two
// writers wait for each other in a cycle.
func (d *Driver) locksOf(ns string, keys ...string) []int64 {
	locks := make([]int64, len(keys))
	for i, k := range keys {
		locks[i] = d.lockKey(ns, k)
	}
	slices.Sort(locks)
	return slices.Compact(locks)
}

// counter reports whether key is a counter: a key under
// backend.CounterPrefix, which package state writes with backend.OpAdd
// only and which the contract lets a driver store in pieces. A commit
// that only adds to a counter adds to a shard of it under its lock taken
// shared, and reads of one take its lock exclusively (see the counters
// table in migrations/001_init.sql).
func (d *Driver) counter(key string) bool { return strings.HasPrefix(key, d.counters) }

// keyLock is the advisory lock of a key a commit touches, and whether the
// commit may take it shared.
type keyLock struct {
	id     int64
	shared bool
}

// sortLocks sorts locks by id and merges repeats, shared only when every
// key sharing the id is.
func sortLocks(locks []keyLock) ([]int64, []bool) {
	slices.SortFunc(locks, func(a, b keyLock) int { return cmp.Compare(a.id, b.id) })
	ids, shared := make([]int64, 0, len(locks)), make([]bool, 0, len(locks))
	for _, l := range locks {
		if n := len(ids); n > 0 && ids[n-1] == l.id {
			shared[n-1] = shared[n-1] && l.shared
			continue
		}
		ids, shared = append(ids, l.id), append(shared, l.shared)
	}
	return ids, shared
}

// commitArgs returns the arguments of the commit function for txn. With
// excl the caller already holds the namespace's lock exclusively; so does
// the commit when it touches more than maxKeyLocks keys.
func (d *Driver) commitArgs(txn *backend.Txn, now any, excl bool) ([]any, error) {
	keys := make([]string, 0, len(txn.If)+len(txn.Then)+len(txn.Events))
	condKeys := make([][]byte, len(txn.If))
	condRevs := make([]int64, len(txn.If))
	for i, c := range txn.If {
		condKeys[i], condRevs[i] = []byte(c.Key), c.Revision
		keys = append(keys, c.Key)
	}
	n := len(txn.Then)
	kinds, opKeys, values := make([]int16, n), make([][]byte, n), make([][]byte, n)
	writers, ttls, times := make([]string, n), make([]int64, n), make([]int64, n)
	distinct := true
	var seen map[string]bool
	if n > 16 {
		seen = make(map[string]bool, n)
	}
	for i, op := range txn.Then {
		switch op.Kind {
		case backend.OpPut:
			kinds[i] = 1
		case backend.OpDelete:
			kinds[i] = 2
		case backend.OpAdd:
			kinds[i] = 3
		default:
			return nil, fmt.Errorf("unknown op kind %d", op.Kind)
		}
		opKeys[i], writers[i], ttls[i] = []byte(op.Key), op.Writer, ttlMs(op.TTL)
		values[i] = op.Value
		if values[i] == nil {
			values[i] = []byte{}
		}
		if !op.Time.IsZero() {
			times[i] = op.Time.UnixMilli()
		}
		if seen != nil {
			distinct = distinct && !seen[op.Key]
			seen[op.Key] = true
		} else {
			for _, o := range txn.Then[:i] {
				distinct = distinct && o.Key != op.Key
			}
		}
		keys = append(keys, op.Key)
	}
	m := len(txn.Events)
	evKeys, evOps, evValues, evPrevs := make([][]byte, m), make([]string, m), make([][]byte, m), make([][]byte, m)
	evPrevOfs, evWriters, evTimes := make([][]byte, m), make([]string, m), make([]int64, m)
	for i, e := range txn.Events {
		evKeys[i], evOps[i], evValues[i], evPrevs[i], evWriters[i] = []byte(e.Key), e.Op, e.Value, e.Prev, e.Writer
		if e.PrevOf != "" {
			evPrevOfs[i] = []byte(e.PrevOf)
			keys = append(keys, e.PrevOf)
		}
		if !e.Time.IsZero() {
			evTimes[i] = e.Time.UnixMilli()
		}
	}
	var locks []int64
	if !excl {
		locks = d.locksOf(txn.NS, keys...)
		if len(locks) > maxKeyLocks {
			excl, locks = true, nil
		}
	}
	// Adds without TTL to counters that nothing else in the commit touches
	// go to shards under the counters' locks taken shared (kind 4); every
	// other counter the commit touches is folded first, under its lock
	// taken exclusively.
	var exact map[string]bool
	if slices.ContainsFunc(keys, d.counter) {
		exact = make(map[string]bool)
	}
	var fold [][]byte
	shared := make([]bool, len(locks))
	if exact != nil {
		for _, c := range txn.If {
			exact[c.Key] = true
		}
		for _, e := range txn.Events {
			if e.PrevOf != "" {
				exact[e.PrevOf] = true
			}
		}
		for _, op := range txn.Then {
			if op.Kind != backend.OpAdd || op.TTL != 0 {
				exact[op.Key] = true
			}
		}
		kl := make([]keyLock, 0, len(keys))
		folded := map[string]bool{}
		for _, k := range keys {
			sh := !excl && !exact[k] && d.counter(k)
			if !sh && d.counter(k) && !folded[k] {
				folded[k] = true
				fold = append(fold, []byte(k))
			}
			kl = append(kl, keyLock{d.lockKey(txn.NS, k), sh})
		}
		for i, op := range txn.Then {
			if op.Kind == backend.OpAdd && !excl && !exact[op.Key] && d.counter(op.Key) {
				kinds[i] = 4
			}
		}
		if !excl {
			locks, shared = sortLocks(kl)
		}
	}
	if fold == nil {
		fold = [][]byte{}
	}
	args := []any{txn.NS, now, d.nsLock(txn.NS), excl, locks, condKeys, condRevs,
		kinds, opKeys, values, writers, ttls, times, distinct,
		evKeys, evOps, evValues, evPrevs, evPrevOfs, evWriters, evTimes, shared, fold}
	return append(args, runCols(txn.Then)...), nil
}

// runCols returns the run_* columns of ops (see
// migrations/004_run_columns.sql): arrays aligned with the ops, NULL where
// an op is not the put of a run whose value backend.SplitRun cuts; all
// empty when there is none.
func runCols(ops []backend.Op) []any {
	var (
		status, agent, parent []*string
		ls, att, fence, upd   []*int64
		cx                    []*int64
		tail                  []*int32
	)
	for i, op := range ops {
		if op.Kind != backend.OpPut || !strings.HasPrefix(op.Key, backend.RunPrefix) {
			continue
		}
		h, t, ok := backend.SplitRun(op.Value)
		if !ok {
			continue
		}
		if status == nil {
			n := len(ops)
			status, agent, parent = make([]*string, n), make([]*string, n), make([]*string, n)
			ls, att, fence, upd, cx = make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n), make([]*int64, n)
			tail = make([]*int32, n)
		}
		off := int32(len(op.Value) - len(t) + 1)
		status[i], agent[i], parent[i] = &h.Status, &h.AgentJSON, &h.Parent
		ls[i], att[i], fence[i], upd[i], cx[i] = &h.LastStep, &h.Attempt, &h.Fence, &h.UpdatedAt, &h.ClaimExpiresAt
		tail[i] = &off
	}
	if status == nil {
		return []any{[]string{}, []string{}, []int64{}, []int64{}, []int64{}, []int64{}, []int64{}, []string{}, []int32{}}
	}
	return []any{status, agent, ls, att, fence, upd, cx, parent, tail}
}

// errNeedExclusive asks Update to start again holding its namespace's lock
// exclusively: the write it computed touches more than maxKeyLocks keys.
var errNeedExclusive = errors.New("the write touches too many keys for key locks")

// Update implements backend.Updater natively: one transaction that takes
// the locks of the keys it reads (as Commit takes those of the keys it
// writes), reads them, calls fn and commits what fn returns, in two round
// trips (begin, lock and read; commit). No other writer of those keys
// runs in between, so fn is called once, except when the database breaks a
// rare deadlock between two updates (each then writes a key the other
// read) or the write touches more keys than key locks allow: then the
// update starts again.
func (d *Driver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	excl := len(q.Keys) > maxKeyLocks
	for {
		res, fnErr, err := d.update(ctx, q, fn, excl)
		if fnErr != nil {
			return backend.Result{}, fnErr
		}
		switch {
		case err == nil:
			return res, nil
		case errors.Is(err, errNeedExclusive) && !excl:
			excl = true
		case deadlocked(ctx, err):
		default:
			return backend.Result{}, d.fail(ctx, "update", err)
		}
	}
}

// deadlocked reports whether err is the database breaking a deadlock by
// failing the call (which was rolled back whole, so it can start again),
// while ctx still allows another attempt.
func deadlocked(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01" && ctx.Err() == nil // deadlock_detected
}

// update runs one attempt of Update. fn's error is returned apart, as it
// must reach the caller unchanged.
func (d *Driver) update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error), excl bool) (backend.Result, error, error) {
	conn, err := d.pool.Acquire(ctx)
	if err != nil {
		return backend.Result{}, nil, err
	}
	defer conn.Release() // a connection left in a transaction is closed, not reused
	keys := make([][]byte, len(q.Keys))
	for i, k := range q.Keys {
		keys[i] = []byte(k)
	}
	var locks []int64
	if !excl {
		locks = d.locksOf(q.NS, q.Keys...)
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(d.q.lockRead, q.NS, nowArg(q.Now), d.nsLock(q.NS), excl, locks, keys, slices.ContainsFunc(q.Keys, d.counter))
	br := conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return backend.Result{}, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return backend.Result{}, nil, err
	}
	recs, nowMs, err := scanRead(rows, q.Keys, q.IncludeExpired)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return backend.Result{}, nil, err
	}
	now := timeOf(q.Now, nowMs)
	txn, fnErr := fn(recs, now)
	if fnErr != nil {
		return backend.Result{}, fnErr, end(ctx, conn, "ROLLBACK")
	}
	if txn == nil {
		return backend.Result{Committed: true, Failed: -1, Now: now}, nil, end(ctx, conn, "COMMIT")
	}
	txn.NS = q.NS
	args, err := d.commitArgs(txn, nowMs, excl)
	if err != nil {
		_ = end(ctx, conn, "ROLLBACK")
		return backend.Result{}, nil, err
	}
	if args[3].(bool) && !excl {
		_ = end(ctx, conn, "ROLLBACK")
		return backend.Result{}, nil, errNeedExclusive
	}
	b = &pgx.Batch{}
	b.Queue(d.q.commit, args...)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	res, err := scanCommit(br.QueryRow(), q.Now)
	if err == nil {
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return backend.Result{}, nil, err
	}
	res.Now = now
	return res, nil, nil
}

// end ends the transaction open on conn with COMMIT or ROLLBACK.
func end(ctx context.Context, conn *pgxpool.Conn, stmt string) error {
	_, err := conn.Exec(ctx, stmt)
	return err
}
