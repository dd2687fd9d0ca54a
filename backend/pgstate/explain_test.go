package pgstate

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/internal/pgtest"
)

// fill writes n records and n events into namespace ns straight into the
// tables (keys k/00000000..., events on 100 keys), and another namespace's
// worth beside it, then vacuums and analyzes the tables, as a store grown
// to n records would be.
func fill(t testing.TB, ctx context.Context, d *Driver, ns string, n int) {
	t.Helper()
	s := d.q.s
	for _, space := range []string{ns, ns + "-other"} {
		for _, sql := range []string{
			`INSERT INTO ` + s + `.records (ns, key, value, writer, rev, crev, updated_at, expires_at)
			 SELECT $1, convert_to('k/' || lpad(i::text, 8, '0'), 'UTF8'), '"v"', 'w', i, i, 0,
			        CASE WHEN i % 10 = 0 THEN 4102444800000 END
			   FROM generate_series(1, $2::integer) AS i`,
			`INSERT INTO ` + s + `.events (ns, id, rev, key, op, value, prev, writer, at)
			 SELECT $1, i, i, convert_to('k/' || lpad((i % 100)::text, 8, '0'), 'UTF8'), 'kv.set', '"v"', NULL, 'w', i
			   FROM generate_series(1, $2::integer) AS i`,
		} {
			if _, err := d.pool.Exec(ctx, sql, space, n); err != nil {
				t.Fatalf("filling: %v", err)
			}
		}
	}
	for _, table := range []string{"records", "events"} { // as autovacuum would, before measuring rather than during
		if _, err := d.pool.Exec(ctx, `VACUUM (ANALYZE) `+s+`.`+table); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestDriver(t testing.TB, ctx context.Context, params ...string) *Driver {
	t.Helper()
	u := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, pgtest.WithParams(t, u, params...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d, err := New(ctx, pool, &Options{Schema: pgtest.Schema(t, u)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPlansAreIndexRangeScans checks with EXPLAIN that, on a store of
// 100,000 records and events, every read the store makes is an index scan
// bounded by what it looks for: point reads and GetMany by the primary key;
// listing (first page and through a cursor) and counting as a range of the
// primary key bounded on both sides; history by the events' primary key or
// their index by key; sweeping by the expiry and time indexes. Costs then
// stay flat as the store grows. (Health's count of a namespace's events
// reads them all; retention bounds them, by default to 100,000.)
func TestPlansAreIndexRangeScans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	const ns = "plans"
	fill(t, ctx, d, ns, 100_000)
	now := time.Now().UnixMilli()
	end, _ := prefixEnd("k/0005")
	countSQL, countArgs := d.q.count(ns, now, []string{"k/0005"})
	both := `Index Cond: \(\(ns = .*\) AND \(key >=? .*\) AND \(key < .*\)\)`
	for _, c := range []struct {
		name string
		sql  string
		args []any
		want []string // regexps the plan must match
	}{
		{"get", d.q.get, []any{ns, []byte("k/00050000"), now},
			[]string{`Index Scan using records_pkey`, `Index Cond: \(\(ns = .*\) AND \(key = .*\)\)`}},
		{"get many", d.q.getMany, []any{ns, [][]byte{[]byte("k/00000001"), []byte("k/00090000")}, now},
			[]string{`Nested Loop Left Join`, `Index Scan using records_pkey`}},
		// A read of counters (GetMany of a run's child counters, say), as
		// read_counters runs it once it holds their locks.
		{"get counters", `SELECT * FROM ` + d.q.s + `.merged($1::text, $2::bytea[])`,
			[]any{ns, [][]byte{[]byte("k/00000001"), []byte("n/s/claimed")}},
			[]string{`Index Scan using records_pkey`, `Index (Only )?Scan using counters_pkey`, `Index Cond: \(\(ns = .*\) AND \(key = .*\)\)`}},
		{"list first page", d.q.list[0][1][0], []any{ns, []byte("k/0005"), now, 100, end},
			[]string{`Limit`, `Index Scan using records_pkey`, both}},
		{"list through a cursor", d.q.list[1][1][1], []any{ns, []byte("k/00050500"), now, 100, end},
			[]string{`Limit`, `Index Scan using records_pkey`, both}},
		{"count", countSQL, countArgs, // the events' count is of every event of the namespace, at most HistoryMaxEvents
			[]string{`Index (Only )?Scan (using|on) records_pkey`, both}},
		// The history function's query, as it runs it once it knows the
		// namespace's settled horizon ($3).
		{"history", `SELECT e.* FROM ` + d.q.s + `.events e WHERE e.ns = $1::text AND e.id < $2::bigint
			AND e.id <= $3::bigint ORDER BY e.id DESC LIMIT $4::integer`, []any{ns, int64(90_000), int64(80_000), 10},
			[]string{`Limit`, `Index Scan Backward using events_pkey`, `Index Cond: \(\(ns = .*\) AND \(id < .*\)\)`}},
		{"history of a key", d.q.historyByKey, []any{ns, []byte("k/00000042"), int64(90_000), 10},
			[]string{`Limit`, `Index Scan Backward using events_key`, `Index Cond: \(\(ns = .*\) AND \(key = .*\) AND \(id < .*\)\)`}},
		{"sweep expired", `SELECT ctid FROM ` + d.q.s + `.records WHERE expires_at <= $1::bigint LIMIT 500`, []any{now},
			[]string{`Index Scan using records_expiry`}},
		{"sweep old events", `SELECT ctid FROM ` + d.q.s + `.events WHERE at < $1::bigint ORDER BY at LIMIT 500`, []any{int64(1000)},
			[]string{`Index Scan using events_at`}},
	} {
		rows, err := d.pool.Query(ctx, "EXPLAIN "+c.sql, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var lines []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		plan := strings.Join(lines, "\n")
		t.Logf("%s:\n%s", c.name, plan)
		if strings.Contains(plan, "Seq Scan on records") || (c.name != "count" && strings.Contains(plan, "Seq Scan")) {
			t.Errorf("%s reads a whole table", c.name)
		}
		for _, w := range c.want {
			if !regexp.MustCompile(w).MatchString(plan) {
				t.Errorf("%s: the plan does not match %s", c.name, w)
			}
		}
	}
}
