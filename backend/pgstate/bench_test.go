package pgstate_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/benchvs"
	"github.com/statesidecar/state/internal/pgtest"
)

// BenchmarkVsRaw measures the store's fast operations against raw pgx on
// the same server and pool, at 1 and 32 goroutines, over a pool of pgxpool's
// default size (max(4, GOMAXPROCS) connections, what a store opened from a
// URL without pool_max_conns gets) and over one of 32 connections, one per
// goroutine:
//
//	STATE_TEST_POSTGRES_URL='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench VsRaw -benchtime 2000x ./backend/pgstate/
//
// The raw baselines are a prepared point SELECT of a small value (for Get)
// and, for the writes, an INSERT ... ON CONFLICT DO UPDATE of the value plus
// an INSERT of a history row, sent as one pgx batch: one round trip, one
// implicit transaction; on 1000 keys for Set, Claim (whose runs exist) and
// their raw upserts, on a new key each time for Acquire (of a new
// resource) and its raw upsert. Each benchmark alternates ten rounds of raw and
// store operations (b.N of each in all), so that both see the same machine
// load, and reports the store's ns/op, the raw one's (raw-ns/op) and the
// store's throughput as a fraction of raw (x-raw), then the CPU time per
// operation of this process and, when the database runs on this machine, of
// the pool's server processes (cpu-ns/op and srv-ns/op, with their raw-*
// twins): steadier than wall time on a loaded machine. The store runs as in
// production: no injected clock, so every statement reads the database's.
// Claim is the native claim (backend.Claimer) of a created run: one round
// trip that writes the run, the counter of claimed runs and an event.
func BenchmarkVsRaw(b *testing.B) {
	u := pgtest.URL(b)
	for _, pool := range []struct {
		name   string
		params []string
	}{
		{"default", nil},
		{"32", []string{"pool_max_conns=32", "pool_min_conns=32"}},
	} {
		for _, g := range []int{1, 32} {
			for _, bm := range []struct{ name, raw string }{
				{"Get", "select"},
				{"Set", "upsert"},
				{"Acquire", "upsert-new"},
				{"Claim", "upsert"},
			} {
				b.Run(bm.name+"/goroutines="+strconv.Itoa(g)+"/pool="+pool.name, func(b *testing.B) {
					e := newBenchEnv(b, u, pool.params...)
					store := benchvs.StoreOp(b, e.st, bm.name)
					benchvs.VsRaw(b, g, e.rawOp(b, bm.raw), store, e.servers(b))
				})
			}
		}
	}
}

// benchEnv is a store over a pool of its own (with the URL parameters
// given), in a schema of its own dropped afterwards; the raw baselines use
// the same pool, in tables of that schema.
type benchEnv struct {
	d  *pgstate.Driver
	st *state.Store
}

func newBenchEnv(b *testing.B, u string, params ...string) *benchEnv {
	b.Helper()
	schema := pgtest.Schema(b, u)
	params = append(params, "application_name="+schema) // so that servers finds the pool's server processes
	d, err := pgstate.Open(ctx, pgtest.WithParams(b, u, params...), &pgstate.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	e := &benchEnv{d: d, st: st}
	b.Cleanup(func() { _ = e.st.Close() })
	s := pgx.Identifier{schema}.Sanitize()
	if _, err := d.Pool().Exec(ctx, `CREATE TABLE `+s+`.raw_kv (k text PRIMARY KEY, v bytea NOT NULL);
		CREATE TABLE `+s+`.raw_history (id bigserial PRIMARY KEY, k text NOT NULL, v bytea, at bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	return e
}

// rawOp returns a raw pgx point SELECT ("select") or an upsert with its
// history row in one batch, of a small JSON value, on 1000 keys ("upsert")
// or a new key each time ("upsert-new").
func (e *benchEnv) rawOp(b *testing.B, kind string) func(int64) error {
	pool, s := e.d.Pool(), pgx.Identifier{e.d.Schema()}.Sanitize()
	val := []byte(`{"n":1}`)
	upsert := `INSERT INTO ` + s + `.raw_kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v`
	history := `INSERT INTO ` + s + `.raw_history (k, v, at) VALUES ($1, $2, $3)`
	if kind == "select" {
		if _, err := pool.Exec(ctx, upsert, "k", val); err != nil {
			b.Fatal(err)
		}
		sel := `SELECT v FROM ` + s + `.raw_kv WHERE k = $1`
		return func(int64) error {
			var v []byte
			return pool.QueryRow(ctx, sel, "k").Scan(&v)
		}
	}
	return func(i int64) error {
		k := "k" + strconv.FormatInt(i%1000, 10)
		if kind == "upsert-new" {
			k = "res-" + strconv.FormatInt(i, 10)
		}
		batch := &pgx.Batch{}
		batch.Queue(upsert, k, val)
		batch.Queue(history, k, val, time.Now().UnixMilli())
		return pool.SendBatch(ctx, batch).Close()
	}
}

// servers returns a function listing the server processes of the
// benchmark's pool (named after its schema), when the database runs on
// this machine, for benchvs to count their CPU time; nil otherwise.
func (e *benchEnv) servers(b *testing.B) func() []int {
	list := func() []int {
		rows, err := e.d.Pool().Query(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, e.d.Schema())
		if err != nil {
			b.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			b.Fatal(err)
		}
		out := make([]int, 0, len(pids))
		for _, p := range pids {
			if benchvs.LocalProcess(int(p), "postgres") {
				out = append(out, int(p))
			}
		}
		return out
	}
	if len(list()) == 0 {
		return nil
	}
	return list
}
