// Package sqlitestate is the SQLite backend of package state, the embedded
// default: one file, no server, pure Go (modernc.org/sqlite, no cgo).
//
// The database runs in WAL mode so readers never wait for the writer.
// Writes take the write lock at BEGIN (BEGIN IMMEDIATE), so several
// processes can share one file safely: a write waits for another process's
// lock, up to Options.LockTimeout (or its context's end, if sooner), and then
// fails with an error matching backend.ErrUnavailable (state.ErrUnavailable)
// rather than with "database is locked" or not at all. Reads never wait for
// writers (WAL) and are bounded the same way. Within a process all writes go through one connection, and
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
// "sqlite:relative/state.db", with optional query parameters synchronous
// (full or normal) and lock_timeout (a Go duration such as 2s).
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
	// LockTimeout bounds how long a call waits for a lock another process
	// holds on the database (a write for the write lock, chiefly) before
	// failing with an error matching backend.ErrUnavailable. Defaults to
	// DefaultLockTimeout; it must not be negative.
	LockTimeout time.Duration
	// MmapSize is how many bytes of the database file each connection reads
	// through a memory map rather than read system calls (SQLite's
	// mmap_size): the operating system's page cache serves every connection
	// at once, so a point read in a large store costs a few memory accesses.
	// Defaults to 1 GiB; a negative value turns it off.
	MmapSize int64
	// CacheKiB is each connection's page cache in KiB (SQLite's cache_size):
	// the pages of the write-ahead log and, beyond MmapSize, of the
	// database. Defaults to 8192 (8 MiB).
	CacheKiB int
	// BesidePython lets Open use a file that holds the Python MCP State
	// Sidecar's tables and none of this store's data, adding the store's
	// tables beside them (which the Python tables do not affect). Without
	// it Open refuses such a file with ErrPythonDatabase. The importer sets
	// it to copy a Python database into the same file.
	BesidePython bool
	// ChangeInterval is how often the store's change check (Notify) asks
	// SQLite whether another connection committed, on a connection of its
	// own, while anyone waits for a change: a process that waits learns of
	// another process's write within this interval. Defaults to 25 ms: a
	// timer that fires more often costs an idle process more CPU than the
	// check itself.
	ChangeInterval time.Duration
}

// DefaultLockTimeout is the default of Options.LockTimeout.
const DefaultLockTimeout = 5 * time.Second

// pingLockWait bounds how long Ping waits for the write lock (less when
// LockTimeout is shorter): a readiness probe must answer quickly.
const pingLockWait = time.Second

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
	switch {
	case r.LockTimeout < 0:
		return r, fmt.Errorf("sqlitestate: lock timeout must not be negative, got %v", r.LockTimeout)
	case r.LockTimeout == 0:
		r.LockTimeout = DefaultLockTimeout
	}
	switch {
	case r.MmapSize == 0:
		r.MmapSize = DefaultMmapSize
	case r.MmapSize < 0:
		r.MmapSize = 0
	}
	if r.CacheKiB <= 0 {
		r.CacheKiB = DefaultCacheKiB
	}
	if r.ChangeInterval <= 0 {
		r.ChangeInterval = DefaultChangeInterval
	}
	return r, nil
}

// Defaults of Options.
const (
	DefaultMmapSize = 1 << 30
	DefaultCacheKiB = 8192
	// DefaultChangeInterval is the default of Options.ChangeInterval.
	DefaultChangeInterval = 25 * time.Millisecond
)

// Driver is a backend.Driver over one SQLite file. Create one with Open.
type Driver struct {
	path   string
	w      *sql.DB // one connection; every write
	r      *sql.DB // query-only connections
	rs     readStmts
	ws     writeStmts
	batch  *batcher
	mu     sync.Mutex // held by Close
	closed bool
	// lockTimeout is Options.LockTimeout.
	lockTimeout time.Duration
	// readDSN opens a query-only connection (Notify's); changeEvery is
	// Options.ChangeInterval.
	readDSN     string
	changeEvery time.Duration
}

var (
	_ backend.Driver  = (*Driver)(nil)
	_ backend.Updater = (*Driver)(nil)
	_ backend.Sweeper = (*Driver)(nil)

	_ backend.HistoryTrimmer = (*Driver)(nil)
	_ backend.Pinger         = (*Driver)(nil)
)

// Open opens (creating it if needed) the SQLite database at path and brings
// its schema up to date. A file that holds the Python MCP State Sidecar's
// tables and none of this store's data is refused with an error matching
// ErrPythonDatabase, unless Options.BesidePython is set.
func Open(ctx context.Context, path string, opts *Options) (*Driver, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, errors.New("sqlitestate: empty database path")
	}
	d := &Driver{path: path, lockTimeout: o.LockTimeout, changeEvery: o.ChangeInterval}
	base := "file:" + (&url.URL{Path: path}).EscapedPath()
	common := fmt.Sprintf("_journal_mode=WAL&_synchronous=%s&_pragma=mmap_size(%d)&_pragma=cache_size(-%d)",
		o.Synchronous, o.MmapSize, o.CacheKiB)
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
	if err := d.retryBusy(ctx, func() error { return migrate(ctx, d.w, o.BesidePython) }); err != nil {
		d.w.Close()
		return nil, fmt.Errorf("sqlitestate: open %s: %w", path, explainOpen(path, err))
	}
	// Readers, too, wait for a lock in retryBusy, which honours the call's
	// context as well as the lock timeout: a statement then never waits in
	// SQLite, so a point read need not be interruptible (see Get).
	d.readDSN = base + "?_busy_timeout=0&" + common + "&_query_only=1"
	if d.r, err = sql.Open("sqlite", d.readDSN); err != nil {
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

// Close closes the database. Package state calls it once, after every
// call has returned, and nothing after it (see package backend); a write
// made directly after Close returns backend.ErrClosed, a read the
// database/sql error of a closed statement, and a second Close
// backend.ErrClosed.
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
