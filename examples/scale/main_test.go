package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
)

// A short run of the whole program on memory and on a SQLite file: every
// operation gets a row with a figure at each size, and the file is removed.
func TestRun(t *testing.T) {
	for _, url := range []string{"mem://", "sqlite://" + filepath.Join(t.TempDir(), "scale.db")} {
		checkRun(t, url)
		if path := strings.TrimPrefix(url, "sqlite://"); path != url {
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the SQLite file is still there: %v", err)
			}
		}
	}
}

// The same on PostgreSQL (when STATE_TEST_POSTGRES_URL is set), in a
// schema of the test's own that the program drops when it is done.
func TestRunPostgres(t *testing.T) {
	u := pgtest.URL(t)
	schema := pgtest.Schema(t, u)
	checkRun(t, pgtest.WithParams(t, u, "schema="+schema))
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var left bool
	if err := pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("schema %s is still there", schema)
	}
}

// On PostgreSQL the filling store's commits do not wait for the disk, and
// the measured store's do, on the same schema.
func TestPostgresFillStore(t *testing.T) {
	u := pgtest.URL(t)
	schema := pgtest.Schema(t, u)
	tgt, err := openTarget(t.Context(), pgtest.WithParams(t, u, "schema="+schema), false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tgt.close(); err != nil {
			t.Error(err)
		}
	}()
	if tgt.fill == tgt.st {
		t.Fatal("one store fills and is measured")
	}
	if tgt.settle == nil {
		t.Error("the store is not vacuumed after filling")
	}
	for _, c := range []struct {
		st   *state.Store
		want string
	}{{tgt.fill, "off"}, {tgt.st, "on"}} {
		d := c.st.Driver().(*pgstate.Driver)
		if d.Schema() != schema {
			t.Errorf("a store is on schema %s, want %s", d.Schema(), schema)
		}
		var got string
		if err := d.Pool().QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("synchronous_commit is %s, want %s", got, c.want)
		}
	}
	if _, err := tgt.fill.Set(t.Context(), "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := tgt.st.Get(t.Context(), "k"); err != nil {
		t.Errorf("the measured store does not see what the filling store wrote: %v", err)
	}
}

// checkRun runs the program on url with small sizes and checks that every
// operation has figures.
func checkRun(t *testing.T, url string) {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-url", url, "-sizes", "1000,2000", "-ops", "20"}, &out, io.Discard); err != nil {
		t.Fatalf("%s: %v\n%s", url, err, out.String())
	}
	t.Logf("%s\n%s", url, out.String())
	for _, op := range []string{"Get", "Set", "ClaimRun (fresh)", "TryAcquire (new)", "Discover tags+claimable",
		"Discover status=running", "Discover status=done", "List first page", "List later page", "History key",
		"History all", "bytes per 1,000 records"} {
		row := ""
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(l, "| "+op+" |") {
				row = l
			}
		}
		if row == "" || strings.Contains(row, "n/a") {
			t.Errorf("%s: no figures for %q:\n%s", url, op, out.String())
		}
	}
}

// -storage weighs one record of each kind.
func TestStorage(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-url", "mem://", "-storage"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| run, created (2 tags) |") {
		t.Errorf("no run row:\n%s", out.String())
	}
}

// Bad flags are refused.
func TestParse(t *testing.T) {
	for _, args := range [][]string{{"-sizes", "100,50"}, {"-sizes", "x"}, {"-ops", "1"}, {"extra"}} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
}

// -raw times the raw engines: a row of figures for each, and the pages they
// read are full (a short page is an error).
func TestRaw(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-raw", "-sizes", "1000,2000", "-ops", "20"}, &out, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, op := range []string{"map: read and copy a value", "B-tree: first page (21 keys)", "B-tree: later page (21 keys)",
		"sorted slice: first page (21 keys)", "sorted slice: later page (21 keys)"} {
		if !strings.Contains(out.String(), "| "+op+" |") {
			t.Errorf("no row for %q:\n%s", op, out.String())
		}
	}
}
