package sqlitestate_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/pythontest"
)

// pythonFile writes the standard Python sidecar fixture to a new file.
func pythonFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	pythontest.Standard(time.Now()).WriteSQLite(t, path)
	return path
}

// storeTables lists the tables of this package in the file.
func storeTables(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'state\_%' ESCAPE '\'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		names = append(names, n)
	}
	return names
}

// TestOpenRefusesAPythonDatabase: a file holding the Python sidecar's
// tables is refused with ErrPythonDatabase, naming the import command, and
// nothing is added to it: no table beside the Python ones, the same bytes.
func TestOpenRefusesAPythonDatabase(t *testing.T) {
	ctx := context.Background()
	path := pythonFile(t)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sqlitestate.Open(ctx, path, nil)
	if !errors.Is(err, sqlitestate.ErrPythonDatabase) || !strings.Contains(err.Error(), "state-sidecar import") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open of a Python database = %v; want ErrPythonDatabase naming the file and the import command", err)
	}
	_, err = state.Open(ctx, "sqlite://"+path)
	if !errors.Is(err, sqlitestate.ErrPythonDatabase) {
		t.Errorf("state.Open of a Python database = %v", err)
	}
	if names := storeTables(t, path); len(names) != 0 {
		t.Errorf("a refused Open added tables %v beside the Python ones", names)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Errorf("a refused Open changed the file")
	}
}

// TestOpenBesidePython: with BesidePython (or beside_python=true) the
// store's tables go beside the Python ones, which keep their rows; once the
// store has written to the file (and even after a reset), it opens without
// the option. A file whose tables only share names with Python's is not
// Python's.
func TestOpenBesidePython(t *testing.T) {
	ctx := context.Background()
	path := pythonFile(t)
	d, err := sqlitestate.Open(ctx, path, &sqlitestate.Options{BesidePython: true})
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if _, err := sqlitestate.Open(ctx, path, nil); !errors.Is(err, sqlitestate.ErrPythonDatabase) {
		t.Errorf("the store's empty tables beside the Python ones: Open = %v, want ErrPythonDatabase (nothing of the store's is there yet)", err)
	}
	if _, err := state.Open(ctx, "sqlite://"+path+"?beside_python=maybe"); err == nil || !strings.Contains(err.Error(), "beside_python") {
		t.Errorf("a bad beside_python: %v", err)
	}
	st, err := state.Open(ctx, "sqlite://"+path+"?beside_python=true")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	d, err = sqlitestate.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("a file the store has written to (then reset) must open: %v", err)
	}
	d.Close()
	db, _ := sql.Open("sqlite", "file:"+path+"?mode=ro")
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM kv_store`).Scan(&n); err != nil || n == 0 {
		t.Errorf("the Python rows beside the store: %d, %v", n, err)
	}

	other := filepath.Join(t.TempDir(), "app.db")
	db2, _ := sql.Open("sqlite", "file:"+other)
	for _, q := range []string{`CREATE TABLE sessions (id TEXT)`, `CREATE TABLE history (id INTEGER)`, `CREATE TABLE workflows (id TEXT)`} {
		if _, err := db2.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db2.Close()
	d, err = sqlitestate.Open(ctx, other, nil)
	if err != nil {
		t.Fatalf("a file with tables that share names with Python's: %v", err)
	}
	if _, err := d.Commit(ctx, &backend.Txn{NS: "x", Then: []backend.Op{{Kind: backend.OpPut, Key: "k", Value: []byte("1")}}}); err != nil {
		t.Fatal(err)
	}
	d.Close()
}
