package sqlitestate

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

// TestMigrationToPerNamespaceCountersReusesNoNumber builds a database of
// schema version 1, whose revision counter and event ids were shared by
// every namespace, and opens it: after the migration, each namespace counts
// on from above everything version 1 handed out, so no fence, version or
// event id is ever handed out twice.
func TestMigrationToPerNamespaceCountersReusesNoNumber(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	stmts := append([]string{`CREATE TABLE state_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`,
		`INSERT INTO state_meta (name, value) VALUES ('schema_version', 1)`}, migrations[0]...)
	stmts = append(stmts,
		`UPDATE state_meta SET value = 41 WHERE name = 'revision'`,
		`INSERT INTO state_records VALUES ('a', 'l/r', '{}', 'A', 40, 40, 0, NULL)`,
		`INSERT INTO state_events (id, ns, rev, key, op, writer, at) VALUES (90, 'a', 40, 'r', 'x', '', 0), (91, 'a', 41, 'r', 'x', '', 0)`,
		`INSERT INTO state_events (id, ns, rev, key, op, writer, at) VALUES (92, 'gone', 41, 'r', 'x', '', 0)`,
		`DELETE FROM state_events WHERE ns = 'gone'`, // a namespace reset before the upgrade
	)
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	db.Close()

	d, err := Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, ns := range []string{"a", "gone", "new"} {
		res, err := d.Commit(ctx, &backend.Txn{NS: ns, Now: time.Now(), Then: []backend.Op{{Kind: backend.OpPut, Key: "l/r", Value: []byte("{}")}},
			Events: []backend.Event{{Key: "r", Op: "x"}}})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.Revision <= 41 || evs[0].ID <= 92 {
			t.Errorf("namespace %s after the migration: revision %d, event id %d; both must be above version 1's (41, 92)", ns, res.Revision, evs[0].ID)
		}
	}
	evs, err := d.History(ctx, &backend.HistoryQuery{NS: "a", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[1].ID != 91 || evs[2].ID != 90 {
		t.Errorf("the events of version 1 must keep their ids: %+v", evs)
	}
	res, err := d.TrimHistory(ctx, &backend.TrimQuery{NS: "a", Keep: 1, Limit: 10})
	if err != nil || res.Events != 2 {
		t.Errorf("the events of version 1 must be trimmable: removed %d, %v", res.Events, err)
	}
}
