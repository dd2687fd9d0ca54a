package sidecar

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// lockFile takes the SQLite write lock of path from another connection, as
// another process would, until the test ends.
func lockFile(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.ExecContext(t.Context(), "ROLLBACK")
		conn.Close()
	})
	if _, err := conn.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
}

// A write behind another process's lock never waits past the request
// deadline: the call fails with a stable message, and reads go on.
func TestSQLiteWriteBehindALockHasADeadline(t *testing.T) {
	cfg := memConfig()
	cfg.Backend, cfg.DBPath = BackendSQLite, filepath.Join(t.TempDir(), "locked.db")
	cfg.RequestTimeout = 300 * time.Millisecond
	r := startHTTP(t, cfg)
	c := connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "before", "value": 1})
	lockFile(t, cfg.DBPath)
	msg := callErr(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	if !strings.Contains(msg, "error id ") || strings.Contains(msg, cfg.DBPath) {
		t.Errorf("a write behind another process's lock: %q", msg)
	}
	if got := call(t, c, "state_get", map[string]any{"key": "before"}); got["found"] != true {
		t.Errorf("reads go on while another process writes: %v", got)
	}
}

// SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS reaches the backend (URL parameter
// lock_timeout): a write behind another process's lock fails after it, well
// before the request deadline, as busy.
func TestSQLiteLockTimeout(t *testing.T) {
	cfg := memConfig()
	cfg.Backend, cfg.DBPath = BackendSQLite, filepath.Join(t.TempDir(), "locked.db")
	cfg.SQLiteLockTimeout = 200 * time.Millisecond
	sc, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		if strings.Contains(err.Error(), `unknown URL parameter "lock_timeout"`) {
			t.Skip("sqlitestate does not take lock_timeout yet (sqlitestate.Options.LockTimeout comes with the core-hardening branch); this test runs once it does")
		}
		t.Fatal(err)
	}
	sc.Close()
	r := startHTTP(t, cfg) // RequestTimeout stays minutes long
	c := connect(t, r.URL, false)
	lockFile(t, cfg.DBPath)
	msg := callErr(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	if strings.Contains(msg, "deadline") || strings.Contains(msg, cfg.DBPath) {
		t.Errorf("a write behind another process's lock must fail on the lock timeout, not the request deadline: %q", msg)
	}
}
