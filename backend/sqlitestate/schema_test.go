package sqlitestate

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/statesidecar/state/backend"
)

// TestOpenMigratesAVersion1File opens a file written at schema version 1
// (with an event in it): it comes up at the current version, without the
// index of events by time, its event still there and ids going on after it.
func TestOpenMigratesAVersion1File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range append([]string{`CREATE TABLE state_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`},
		append(migrations[0],
			`INSERT INTO state_meta (name, value) VALUES ('schema_version', 1)`,
			`INSERT INTO state_events (ns, rev, key, op, value, prev, writer, at) VALUES ('ns', 1, 'k', 'kv.set', '1', NULL, '', 5)`)...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	d, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var v, idx int
	if err := d.r.QueryRow(`SELECT value FROM state_meta WHERE name = 'schema_version'`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d (%v), want %d", v, err, SchemaVersion)
	}
	if err := d.r.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'state_events_at'`).Scan(&idx); err != nil || idx != 0 {
		t.Errorf("the index of events by time is still there (%v)", err)
	}
	if _, err := d.Commit(ctx, &backend.Txn{NS: "ns", Events: []backend.Event{{Key: "k", Op: "kv.set"}}}); err != nil {
		t.Fatal(err)
	}
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: "ns", Limit: 10})
	if err != nil || len(evs) != 2 || evs[0].ID <= evs[1].ID {
		t.Errorf("history after the migration: %+v, %v", evs, err)
	}
}
