// Package sqlitestate is the SQLite backend of package state, the embedded
// default: one file, no server, pure Go (modernc.org/sqlite, no cgo).
//
// The database runs in WAL mode so readers never wait for the writer.
// Writes take the write lock at BEGIN (BEGIN IMMEDIATE), so several
// processes can share one file safely: a write waits for another process's
// lock until its context ends rather than failing with "database is
// locked". Within a process all writes go through one connection, and
// concurrent writes are batched into one transaction (group commit), so many
// writers share one fsync. A process that has held the write lock
// continuously for a while pauses briefly, so processes sharing a file under
// load take turns instead of one starving the others. With the default synchronous
// level FULL a write that returned survives a process crash and a power loss.
//
// The schema is versioned and created or migrated when the file is opened.
// Its tables are prefixed "state_" so the file can sit beside other tables.
//
// It registers the "sqlite" URL scheme: "sqlite:///abs/path/state.db" or
// "sqlite:relative/state.db", with an optional query parameter synchronous
// (full or normal).
package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"runtime"
	"sync"
	"time"

	"github.com/statesidecar/state/backend"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Options configure a Driver. A nil *Options means defaults.
type Options struct {
	// Synchronous is SQLite's synchronous level: "full" (the default: a
	// returned write survives power loss) or "normal" (faster; a returned
	// write survives a process crash but the last ones may roll back on power
	// loss).
	Synchronous string
	// Readers is the size of the pool of reading connections. Defaults to
	// max(4, GOMAXPROCS).
	Readers int
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	switch r.Synchronous {
	case "":
		r.Synchronous = "full"
	case "full", "normal":
	default:
		return r, fmt.Errorf("sqlitestate: synchronous must be full or normal, got %q", r.Synchronous)
	}
	if r.Readers <= 0 {
		r.Readers = max(4, runtime.GOMAXPROCS(0))
	}
	return r, nil
}

// Driver is a backend.Driver over one SQLite file. Create one with Open.
type Driver struct {
	path   string
	w      *sql.DB // one connection; every write
	r      *sql.DB // query-only connections
	rs     readStmts
	ws     writeStmts
	batch  *batcher
	mu     sync.RWMutex // read-held by calls, write-held by Close
	closed bool
}

var (
	_ backend.Driver  = (*Driver)(nil)
	_ backend.Updater = (*Driver)(nil)
	_ backend.Sweeper = (*Driver)(nil)
)

// Open opens (creating it if needed) the SQLite database at path and brings
// its schema up to date.
func Open(ctx context.Context, path string, opts *Options) (*Driver, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("sqlitestate: empty database path")
	}
	d := &Driver{path: path}
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	common := "_journal_mode=WAL&_synchronous=" + o.Synchronous
	// The writer polls for the write lock itself (see batcher) rather than in
	// SQLite's busy handler, whose sleeps grow to 100ms and starve it while
	// another process writes continuously.
	if d.w, err = sql.Open("sqlite", base+"?_busy_timeout=0&"+common+"&_txlock=immediate"); err != nil {
		return nil, fmt.Errorf("sqlitestate: open %s: %w", path, err)
	}
	d.w.SetMaxOpenConns(1)
	d.w.SetMaxIdleConns(1)
	d.w.SetConnMaxIdleTime(0)
	d.w.SetConnMaxLifetime(0)
	if err := retryBusy(ctx, func() error { return migrate(ctx, d.w) }); err != nil {
		d.w.Close()
		return nil, fmt.Errorf("sqlitestate: open %s: %w", path, err)
	}
	if d.r, err = sql.Open("sqlite", base+"?_busy_timeout=5000&"+common+"&_query_only=1"); err != nil {
		d.w.Close()
		return nil, fmt.Errorf("sqlitestate: open %s: %w", path, err)
	}
	d.r.SetMaxOpenConns(o.Readers)
	d.r.SetMaxIdleConns(o.Readers)
	if err := d.prepare(ctx); err != nil {
		d.w.Close()
		d.r.Close()
		return nil, fmt.Errorf("sqlitestate: open %s: %w", path, err)
	}
	d.batch = newBatcher(d)
	return d, nil
}

// Name returns "sqlite".
func (d *Driver) Name() string { return "sqlite" }

// Path returns the database file's path.
func (d *Driver) Path() string { return d.path }

// enter marks the start of a call.
func (d *Driver) enter(ctx context.Context) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.RLock()
	if d.closed {
		d.mu.RUnlock()
		return nil, backend.ErrClosed
	}
	return d.mu.RUnlock, nil
}

// Close waits for calls in flight and closes the database.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return backend.ErrClosed
	}
	d.closed = true
	d.batch.close()
	return errors.Join(d.rs.close(), d.ws.close(), d.r.Close(), d.w.Close())
}

// isBusy reports whether err is SQLite's "database is locked" or "table is
// locked", which mean: try again.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// retryBusy runs f until it returns something other than a busy error or
// ctx ends, backing off between attempts. The busy timeout already waits
// inside SQLite; this covers the cases where SQLite gives up early (a lock
// upgrade that would deadlock, or a wait longer than the timeout).
func retryBusy(ctx context.Context, f func() error) error {
	wait := time.Millisecond
	for {
		err := f()
		if !isBusy(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting for the database lock: %v)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func fromMs(v int64) time.Time { return time.UnixMilli(v).UTC() }

// nowOr returns t, or the process clock when t is zero, in ms.
func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC().Truncate(time.Millisecond)
	}
	return t
}

// prefixEnd returns the smallest string greater than every string with
// prefix p, or "" when there is none (p is empty or all 0xff bytes).
func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1])
		}
	}
	return ""
}
