package sqlitestate_test

// Benchmarks of the Store over SQLite beside the raw engine doing the same
// work on the same file with the same pragmas (WAL, synchronous=FULL, BEGIN
// IMMEDIATE, one writing connection):
//
//	go test -run '^$' -bench . -benchtime 2s ./backend/sqlitestate/
//
// Compare each Store benchmark with its Raw twin in the same run. The
// VsRaw benchmarks alternate rounds of the two themselves and report the
// ratio (see BenchmarkVsRaw and BenchmarkClaimVsRaw).

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/benchvs"
)

const benchKeys = 10_000

type benchEnv struct {
	path string
	st   *state.Store
	raw  *sql.DB // same file, same pragmas, one connection
	get  *sql.Stmt
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	d, err := sqlitestate.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	raw, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=full&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	raw.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = raw.Close() })
	for _, q := range []string{
		`CREATE TABLE raw_kv (key TEXT PRIMARY KEY, value BLOB NOT NULL, updated_at INTEGER NOT NULL, expires_at INTEGER) WITHOUT ROWID`,
		`CREATE TABLE raw_history (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, value BLOB, prev BLOB, at INTEGER NOT NULL)`,
	} {
		if _, err := raw.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	items := make([]state.Item, 0, 500)
	for i := range benchKeys {
		items = append(items, state.Item{Key: fmt.Sprintf("key-%05d", i), Value: map[string]any{"n": i, "text": "some agent state"}})
		if len(items) == cap(items) || i == benchKeys-1 {
			if _, err := st.SetMany(ctx, items); err != nil {
				b.Fatal(err)
			}
			items = items[:0]
		}
		if _, err := raw.Exec(`INSERT INTO raw_kv VALUES (?, ?, ?, NULL)`, fmt.Sprintf("key-%05d", i),
			[]byte(fmt.Sprintf(`{"n":%d,"text":"some agent state"}`, i)), time.Now().UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	get, err := raw.Prepare(`SELECT value FROM raw_kv WHERE key = ?`)
	if err != nil {
		b.Fatal(err)
	}
	return &benchEnv{path: path, st: st, raw: raw, get: get}
}

// rawSet is what a plain SQLite user writes for a set with an audit row.
func (e *benchEnv) rawSet(key string, val []byte) error {
	tx, err := e.raw.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	if _, err := tx.Exec(`INSERT INTO raw_kv (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, expires_at = NULL`, key, val, now); err != nil {
		return err
	}
	if _, err := tx.Exec(`INSERT INTO raw_history (key, value, at) VALUES (?, ?, ?)`, key, val, now); err != nil {
		return err
	}
	return tx.Commit()
}

func BenchmarkGet(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.Run("Store", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := e.st.Get(ctx, fmt.Sprintf("key-%05d", i%benchKeys)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Raw", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			var v []byte
			if err := e.get.QueryRow(fmt.Sprintf("key-%05d", i%benchKeys)).Scan(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkSet(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	val := []byte(`{"n":1,"text":"some agent state"}`)
	b.Run("Store", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := e.st.Set(ctx, fmt.Sprintf("key-%05d", i%benchKeys), jsonRaw(val)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Raw", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := e.rawSet(fmt.Sprintf("key-%05d", i%benchKeys), val); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSet16 runs 16 concurrent writers.
func BenchmarkSet16(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	val := []byte(`{"n":1,"text":"some agent state"}`)
	var n atomic.Int64
	b.Run("Store", func(b *testing.B) {
		b.SetParallelism(16 / max(1, runtimeProcs()))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := e.st.Set(ctx, fmt.Sprintf("key-%05d", n.Add(1)%benchKeys), jsonRaw(val)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("Raw", func(b *testing.B) {
		b.SetParallelism(16 / max(1, runtimeProcs()))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := e.rawSet(fmt.Sprintf("key-%05d", n.Add(1)%benchKeys), val); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

func BenchmarkClaim(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	ids := make([]string, 0, 1<<16)
	b.Run("Store", func(b *testing.B) {
		b.StopTimer()
		ids = ids[:0]
		for range b.N {
			r, err := e.st.CreateRun(ctx, "job", map[string]string{"pipeline": "bench"})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		b.StartTimer()
		for i := range b.N {
			if _, err := e.st.ClaimRun(ctx, ids[i], "agent"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkClaimVsRaw measures a fresh claim (and a lease acquire) against
// the raw set transaction (an upsert and an audit insert, committed), at 1
// and 32 goroutines:
//
//	go test -run '^$' -bench VsRaw -benchtime 2000x -count 3 ./backend/sqlitestate/
//
// It alternates ten rounds of raw transactions and store operations (b.N
// of each in all), so that both see the same machine load, and reports the
// store's ns/op, the raw transaction's (raw-ns/op) and the store's cost as
// a multiple of raw (x-raw-cost), then the CPU time per operation of each
// (cpu-ns/op, raw-cpu-ns/op; SQLite runs in this process), steadier than
// wall time on a loaded machine. With 32 goroutines the raw engine, one
// connection, runs one transaction (one fsync) at a time, while the store
// commits the writes that arrive together in one (group commit).
func BenchmarkClaimVsRaw(b *testing.B) {
	for _, g := range []int{1, 32} {
		for _, bm := range []struct {
			name  string
			setup func(b *testing.B, e *benchEnv, n int) func(i int64) error
		}{
			{"Claim", func(b *testing.B, e *benchEnv, n int) func(int64) error {
				ids := make([]string, n)
				for i := range ids {
					r, err := e.st.CreateRun(context.Background(), "job", map[string]string{"pipeline": "bench"})
					if err != nil {
						b.Fatal(err)
					}
					ids[i] = r.ID
				}
				return func(i int64) error { _, err := e.st.ClaimRun(context.Background(), ids[i], "agent"); return err }
			}},
			{"Acquire", func(b *testing.B, e *benchEnv, n int) func(int64) error {
				return func(i int64) error {
					_, err := e.st.TryAcquireLease(context.Background(), fmt.Sprintf("res-%d", i), "holder", time.Minute)
					return err
				}
			}},
		} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", bm.name, g), func(b *testing.B) {
				e := newBenchEnv(b)
				store := bm.setup(b, e, b.N)
				val := []byte(`{"n":1,"text":"some agent state"}`)
				raw := func(i int64) error { return e.rawSet(fmt.Sprintf("key-%05d", i%benchKeys), val) }
				rawT, storeT := benchvs.Measure(b, g, raw, store, nil)
				n := float64(b.N)
				b.ReportMetric(float64(storeT.Wall.Nanoseconds())/n, "ns/op")
				b.ReportMetric(float64(rawT.Wall.Nanoseconds())/n, "raw-ns/op")
				b.ReportMetric(float64(storeT.Wall)/float64(rawT.Wall), "x-raw-cost")
				b.ReportMetric(float64(storeT.CPU.Nanoseconds())/n, "cpu-ns/op")
				b.ReportMetric(float64(rawT.CPU.Nanoseconds())/n, "raw-cpu-ns/op")
			})
		}
	}
}

func BenchmarkAcquire(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	b.Run("Store", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if _, err := e.st.TryAcquireLease(ctx, fmt.Sprintf("res-%d", i), "holder", time.Minute); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVsRaw measures the store's Get and Set against the raw engine
// doing the same work on the same file, at 1 and 32 goroutines:
//
//	go test -run '^$' -bench '^BenchmarkVsRaw$' -benchtime 2000x -count 5 ./backend/sqlitestate/
//
// A raw get is a prepared SELECT of the value on a pool of reading
// connections as large as the store's (Options.Readers' default); a raw
// set is the upsert and audit insert of rawSet, committed, on one writing
// connection. Like BenchmarkClaimVsRaw (and the other backends' VsRaw
// benchmarks, through package benchvs) it alternates ten rounds of raw
// and store operations, b.N of each in all, and reports the store's ns/op,
// the raw one's (raw-ns/op), the store's throughput as a fraction of
// raw's (x-raw) and the CPU time per operation of each (cpu-ns/op,
// raw-cpu-ns/op), which SQLite, running in this process, spends here: CPU
// time is much steadier than wall time on a loaded machine, and wall time
// for Set is mostly fsync. At 32 goroutines the store commits the sets
// that arrive together in one transaction (group commit), which the raw
// engine, one transaction per set, does not.
func BenchmarkVsRaw(b *testing.B) {
	for _, g := range []int{1, 32} {
		for _, name := range []string{"Get", "Set"} {
			b.Run(fmt.Sprintf("%s/goroutines=%d", name, g), func(b *testing.B) {
				e := newBenchEnv(b)
				ctx := context.Background()
				val := []byte(`{"n":1,"text":"some agent state"}`)
				key := func(i int64) string { return fmt.Sprintf("key-%05d", i%benchKeys) }
				var raw, store func(int64) error
				if name == "Get" {
					rd, err := sql.Open("sqlite", "file:"+e.path+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=full")
					if err != nil {
						b.Fatal(err)
					}
					rd.SetMaxOpenConns(max(4, runtime.GOMAXPROCS(0)))
					rd.SetMaxIdleConns(max(4, runtime.GOMAXPROCS(0)))
					b.Cleanup(func() { _ = rd.Close() })
					get, err := rd.Prepare(`SELECT value FROM raw_kv WHERE key = ?`)
					if err != nil {
						b.Fatal(err)
					}
					raw = func(i int64) error { var v []byte; return get.QueryRow(key(i)).Scan(&v) }
					store = func(i int64) error { _, err := e.st.Get(ctx, key(i)); return err }
				} else {
					raw = func(i int64) error { return e.rawSet(key(i), val) }
					store = func(i int64) error { _, err := e.st.Set(ctx, key(i), jsonRaw(val)); return err }
				}
				benchvs.VsRaw(b, g, raw, store, nil)
			})
		}
	}
}

func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
