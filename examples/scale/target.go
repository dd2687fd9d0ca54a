package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/objstate"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/redistest"
)

// target is the store under measurement and how to weigh it.
type target struct {
	st *state.Store
	// fill is the store the command fills st through: st itself, except
	// on PostgreSQL (see openTarget).
	fill     *state.Store
	describe string
	// bytes returns what the store takes: the file for SQLite, the keys'
	// memory for Redis, the heap for memory; unweighed says it cannot.
	bytes     func(ctx context.Context) (int64, error)
	unweighed bool
	// settle, when set, does after each fill what the backend's own
	// housekeeping would have done in the background meanwhile.
	settle func(ctx context.Context) error
	close  func() error
}

// openTarget opens the store at rawURL, with the background sweeper off
// (the command sweeps when it chooses). A SQLite file must not exist yet; a
// Redis store gets a key prefix of its own unless the URL names one, and a
// PostgreSQL store a schema of its own unless the URL names one. Any
// other registered scheme works too (import its package in main.go), its
// storage left unmeasured.
//
// A PostgreSQL store is filled through a second store on the same schema
// whose sessions set synchronous_commit=off: the same calls write the same
// rows, records, counters and history, but a filling commit does not wait
// for its WAL to reach the disk (PostgreSQL flushes it within
// wal_writer_delay), which halves the time a fill takes; the timed calls go
// through st, with the server's settings.
func openTarget(ctx context.Context, rawURL string, keep bool) (*target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	opts := &state.Options{SweepInterval: -1}
	switch u.Scheme {
	case "sqlite":
		path := u.Path
		if path == "" {
			path = u.Opaque
		}
		if _, err := os.Stat(path); err == nil {
			return nil, fmt.Errorf("%s exists: give the path of a new file", path)
		}
	case "redis", "rediss":
		if u.Query().Get("prefix") == "" {
			q := u.Query()
			q.Set("prefix", "scale-"+strings.ToLower(rand.Text()[:8]))
			u.RawQuery = q.Encode()
		}
	// --- object-store backends (issue 23) ---
	case s3state.Scheme:
		if strings.Trim(u.Path, "/") == "" {
			u.Path = "/scale-" + strings.ToLower(rand.Text()[:8])
		}
	// --- end object-store backends ---
	case pgstate.Scheme, pgstate.AltScheme:
		if u.Query().Get("schema") == "" {
			q := u.Query()
			q.Set("schema", "scale_"+strings.ToLower(rand.Text()[:8]))
			u.RawQuery = q.Encode()
		}
	}
	var base runtime.MemStats
	if u.Scheme == "mem" {
		runtime.GC()
		runtime.ReadMemStats(&base)
	}
	st, err := state.DefaultURLMux().Open(ctx, u.String(), opts)
	if err != nil {
		return nil, err
	}
	t := &target{st: st, fill: st, describe: redact(u), close: st.Close}
	switch d := st.Driver().(type) {
	case *sqlitestate.Driver:
		side, err := sql.Open("sqlite", "file:"+(&url.URL{Path: d.Path()}).EscapedPath()+"?_pragma=busy_timeout(10000)")
		if err != nil {
			_ = st.Close()
			return nil, err
		}
		t.bytes = func(ctx context.Context) (int64, error) { return sqliteBytes(ctx, side) }
		t.close = func() error { return errors.Join(side.Close(), st.Close()) }
		if !keep {
			t.close = func() error {
				return errors.Join(side.Close(), st.Close(), remove(d.Path()), remove(d.Path()+"-wal"), remove(d.Path()+"-shm"))
			}
		}
	case *redisstate.Driver:
		rdb, prefix := d.Client(), d.Prefix()
		t.bytes = func(ctx context.Context) (int64, error) { return redisBytes(ctx, rdb, prefix) }
		if !keep {
			t.close = func() error {
				return errors.Join(redistest.Purge(context.Background(), rdb, prefix), st.Close())
			}
		}
	case *pgstate.Driver:
		q := u.Query()
		q.Set("schema", d.Schema())
		q.Set("synchronous_commit", "off")
		q.Set("listen", "off") // nothing waits on the filling store
		fu := *u
		fu.RawQuery = q.Encode()
		if t.fill, err = state.DefaultURLMux().Open(ctx, fu.String(), opts); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		pool, schema := d.Pool(), pgx.Identifier{d.Schema()}.Sanitize()
		// Overwrites, finished runs and the history trimmed to its cap
		// leave dead rows, which autovacuum reclaims and sets statistics
		// by; on a server with it off (the store's Health warns of it),
		// a history read of a key then visits the dead events of its
		// trimmed history. Vacuum as autovacuum would, before measuring
		// rather than during.
		t.settle = func(ctx context.Context) error {
			for _, table := range []string{"records", "events"} {
				if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+schema+"."+table); err != nil {
					return fmt.Errorf("vacuuming %s: %w", table, err)
				}
			}
			return nil
		}
		t.bytes = func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('`+schema+`.records') +
				pg_total_relation_size('`+schema+`.events')`).Scan(&n)
			return n, err
		}
		t.close = func() error { return errors.Join(t.fill.Close(), st.Close()) }
		if !keep {
			t.close = func() error {
				ferr := t.fill.Close()
				_, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
				return errors.Join(ferr, err, st.Close())
			}
		}
	// --- object-store backends (issue 23) ---
	case *objstate.Driver:
		// Storage is what the bucket or the directory holds (heads,
		// segments, snapshots); the cache each process keeps is reported
		// on stderr as the heap in use.
		m, prefix := d.Medium(), d.Prefix()
		t.bytes = func(ctx context.Context) (int64, error) {
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			fmt.Fprintf(os.Stderr, "scale: heap in use %.1f MiB (the store's cache and the command)\n", float64(ms.HeapAlloc)/(1<<20))
			var n int64
			err := m.List(ctx, prefix+"ns/", func(o objstate.ObjectInfo) bool { n += o.Size; return true })
			return n, err
		}
		// A fill leaves a snapshot (some 360 MB at a million records)
		// and merges being written behind it, which load the disk the
		// timed writes wait on; wait for them, as the PostgreSQL target
		// vacuums, before measuring rather than during.
		t.settle = d.WaitCompactions
		if !keep {
			t.close = func() error {
				var keys []string
				err := m.List(context.Background(), prefix, func(o objstate.ObjectInfo) bool { keys = append(keys, o.Key); return true })
				for _, k := range keys {
					err = errors.Join(err, m.Delete(context.Background(), k))
				}
				return errors.Join(err, st.Close())
			}
		}
	// --- end object-store backends ---
	default:
		if u.Scheme != "mem" {
			t.bytes = func(context.Context) (int64, error) { return 0, nil }
			t.unweighed = true
			break
		}
		t.bytes = func(context.Context) (int64, error) {
			var m runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m)
			return int64(m.HeapAlloc) - int64(base.HeapAlloc), nil
		}
	}
	return t, nil
}

// remove removes a file that may not exist.
func remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// redact drops a password from a URL for printing.
func redact(u *url.URL) string {
	c := *u
	if _, ok := c.User.Password(); ok {
		c.User = url.UserPassword(c.User.Username(), "xxx")
	}
	return c.String()
}

// sqliteBytes checkpoints the write-ahead log into the database and
// returns the bytes of the database's pages in use (free pages left by
// deletions are not counted: SQLite reuses them).
func sqliteBytes(ctx context.Context, db *sql.DB) (int64, error) {
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return 0, err
	}
	var pages, free, size int64
	for q, dst := range map[string]*int64{`PRAGMA page_count`: &pages, `PRAGMA freelist_count`: &free, `PRAGMA page_size`: &size} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			return 0, err
		}
	}
	return (pages - free) * size, nil
}

// redisBytes sums MEMORY USAGE over every key of the prefix (every
// namespace), pipelined a thousand at a time.
func redisBytes(ctx context.Context, rdb redis.UniversalClient, prefix string) (int64, error) {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return 0, errors.New("measuring Redis memory needs a standalone server")
	}
	var total int64
	iter := c.Scan(ctx, 0, "{"+prefix+"[:}]*", 1000).Iterator()
	batch := make([]string, 0, 1000)
	flush := func() error {
		cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range batch {
				p.MemoryUsage(ctx, k, 0)
			}
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		for _, cmd := range cmds {
			if n, err := cmd.(*redis.IntCmd).Result(); err == nil {
				total += n
			}
		}
		batch = batch[:0]
		return nil
	}
	for iter.Next(ctx) {
		if batch = append(batch, iter.Val()); len(batch) == cap(batch) {
			if err := flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return 0, err
	}
	return total, flush()
}
