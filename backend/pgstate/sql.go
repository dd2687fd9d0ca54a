package pgstate

import (
	"strconv"
	"strings"
)

// clockMs is the database's clock in Unix milliseconds.
const clockMs = `floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint`

// recordCols are the columns scanRecord reads.
const recordCols = `value, writer, rev, crev, updated_at, expires_at`

// queries are the driver's statements, with its schema filled in. Each has
// explicit parameter types, so that it reads the same in every pgx query
// execution mode (PgBouncer setups use exec or simple_protocol).
type queries struct {
	get, getMany, serverTime            string
	list                                [2][2][2]string // [after][bounded][keysOnly]
	historyAll, historyByKey            string
	commit, set, lockRead, lease, reset string
	readCounters, listCounted           string // reads of ranges or keys holding counters
	sweep, trim, ping, settings, claim  string
	listen, refresh, unlisten           string // a listener's registration (Notify)
	lockNS, lockKeys                    string // a batch's locks, taken first (see batcher)
	awaitWriters                        string
	s                                   string // the quoted schema
}

func newQueries(schema string) queries {
	q := queries{s: expand("{{s}}", schema)}
	s := q.s
	q.get = `SELECT ` + recordCols + ` FROM ` + s + `.records
		WHERE ns = $1::text AND key = $2::bytea AND (expires_at IS NULL OR expires_at > coalesce($3::bigint, ` + clockMs + `))`
	q.getMany = `SELECT k.key, r.value, r.writer, r.rev, r.crev, r.updated_at, r.expires_at, t.now
		FROM (SELECT coalesce($3::bigint, ` + clockMs + `) AS now) AS t
		CROSS JOIN unnest($2::bytea[]) WITH ORDINALITY AS k(key, i)
		LEFT JOIN LATERAL (SELECT x.* FROM ` + s + `.records x WHERE x.ns = $1::text AND x.key = k.key LIMIT 1) r ON true
		ORDER BY k.i`
	q.serverTime = `SELECT ` + clockMs
	// Listing has one lower bound, the greater of the prefix and the cursor
	// (chosen by the caller), so that the primary key's range scan starts
	// where the page starts, and an upper bound when the prefix has one.
	for after := range 2 {
		for bounded := range 2 {
			for keysOnly := range 2 {
				cols := `key, ` + recordCols
				if keysOnly == 1 {
					cols = `key, rev, crev`
				}
				lower := `key >= $2::bytea`
				if after == 1 {
					lower = `key > $2::bytea`
				}
				upper := ``
				if bounded == 1 {
					upper = ` AND key < $5::bytea`
				}
				q.list[after][bounded][keysOnly] = `SELECT ` + cols + ` FROM ` + s + `.records
					WHERE ns = $1::text AND ` + lower + upper + `
					AND (expires_at IS NULL OR expires_at > coalesce($3::bigint, ` + clockMs + `))
					ORDER BY key LIMIT $4::integer`
			}
		}
	}
	const eventCols = `id, rev, key, op, value, prev, writer, at`
	q.historyAll = `SELECT ` + eventCols + ` FROM ` + s + `.history($1::text, $2::bigint, $3::bigint, $4::integer)`
	q.historyByKey = `SELECT ` + eventCols + ` FROM ` + s + `.events
		WHERE ns = $1::text AND key = $2::bytea AND id < $3::bigint ORDER BY id DESC LIMIT $4::integer`
	q.commit = `SELECT committed, rev, failed, cur, now FROM ` + s + `.commit($1::text, $2::bigint, $3::bigint,
		$4::boolean, $5::bigint[], $6::bytea[], $7::bigint[], $8::smallint[], $9::bytea[], $10::bytea[],
		$11::text[], $12::bigint[], $13::bigint[], $14::boolean, $15::bytea[], $16::text[], $17::bytea[],
		$18::bytea[], $19::bytea[], $20::text[], $21::bigint[], $22::boolean[], $23::bytea[],
		$24::text[], $25::text[], $26::bigint[], $27::bigint[], $28::bigint[], $29::bigint[], $30::bigint[],
		$31::text[], $32::integer[])`
	q.set = `SELECT committed, rev, cur, now FROM ` + s + `.set($1::text, $2::bigint, $3::bigint, $4::bigint,
		$5::bytea, $6::bytea, $7::text, $8::bigint, $9::bigint, $10::bigint, $11::bytea, $12::text)`
	q.lockRead = `SELECT key, value, writer, rev, crev, updated_at, expires_at, now FROM ` + s + `.lock_read(
		$1::text, $2::bigint, $3::bigint, $4::boolean, $5::bigint[], $6::bytea[], $7::boolean)`
	q.readCounters = `SELECT key, value, writer, rev, crev, updated_at, expires_at, now FROM ` + s + `.read_counters(
		$1::text, $2::bigint, $3::bigint, $4::boolean, $5::bigint[], $6::bytea[])`
	q.listCounted = `SELECT key, ` + recordCols + ` FROM ` + s + `.list_counted($1::text, $2::bigint, $3::bytea,
		$4::boolean, $5::bytea, $6::bigint, $7::integer)`
	q.lease = `SELECT ok, now, takeover, present, writer, rev, crev, updated_at, expires_at, value FROM ` + s + `.lease(
		$1::text, $2::bigint, $3::bigint, $4::bigint, $5::integer, $6::bytea, $7::text, $8::bigint, $9::bytea, $10::bytea)`
	q.reset = `SELECT records, events FROM ` + s + `.reset($1::text, $2::bigint, $3::bytea[], $4::bytea[])`
	q.sweep = `SELECT swept, records, events, more FROM ` + s + `.sweep($1::bigint, $2::bigint, $3::bigint,
		$4::integer, $5::bigint, $6::bigint)`
	q.claim = `SELECT outcome, now, reclaimed, value, writer, rev, crev, updated_at, expires_at FROM ` + s + `.claim_run(
		$1::text, $2::bigint, $3::bigint, $4::bigint, $5::bigint, $6::bytea, $7::bytea, $8::text, $9::text,
		$10::bigint, $11::bytea, $12::bigint, $13::bytea, $14::text)`
	q.trim = `SELECT trimmed, events FROM ` + s + `.trim($1::text, $2::bigint, $3::bigint, $4::integer)`
	q.listen = `INSERT INTO ` + s + `.listeners (id, expires_at)
		VALUES ($1::text, clock_timestamp() + $2::bigint * interval '1 millisecond')
		ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at`
	q.refresh = `WITH u AS (UPDATE ` + s + `.listeners SET expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
		WHERE id = $1::text AND expires_at > clock_timestamp() RETURNING 1) SELECT EXISTS (SELECT FROM u)`
	q.unlisten = `DELETE FROM ` + s + `.listeners WHERE id = $1::text`
	q.awaitWriters = `SELECT ` + s + `.await_writers($1::integer)`
	q.lockNS = `SELECT pg_advisory_xact_lock_shared($1::bigint)`
	q.lockKeys = `SELECT count(pg_advisory_xact_lock(l)) FROM unnest($1::bigint[]) AS l`
	q.ping = `SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'`
	q.settings = `SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit',
		'default_transaction_isolation', 'autovacuum', 'max_connections', 'superuser_reserved_connections',
		'reserved_connections')`
	return q
}

// count returns a statement counting, in one row, the live records under
// each prefix and the namespace's events, with its arguments: $1 the
// namespace, $2 now (when there are prefixes), then each prefix's bounds
// (an upper bound only when it has one).
func (q *queries) count(ns string, now any, prefixes []string) (string, []any) {
	args := []any{ns}
	if len(prefixes) > 0 {
		args = append(args, now)
	}
	var b strings.Builder
	b.WriteString(`SELECT `)
	for _, p := range prefixes {
		args = append(args, []byte(p))
		b.WriteString(`(SELECT count(*) FROM ` + q.s + `.records WHERE ns = $1::text AND key >= $` + strconv.Itoa(len(args)) + `::bytea`)
		if end, ok := prefixEnd(p); ok {
			args = append(args, end)
			b.WriteString(` AND key < $` + strconv.Itoa(len(args)) + `::bytea`)
		}
		b.WriteString(` AND (expires_at IS NULL OR expires_at > coalesce($2::bigint, ` + clockMs + `))), `)
	}
	b.WriteString(`(SELECT count(*) FROM ` + q.s + `.events WHERE ns = $1::text)`)
	return b.String(), args
}

// prefixEnd returns the smallest key greater than every key with prefix p,
// and false when there is none (p is empty or all 0xff bytes).
func prefixEnd(p string) ([]byte, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return b[:i+1], true
		}
	}
	return nil, false
}
