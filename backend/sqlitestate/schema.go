package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations bring the schema from version i to i+1. They only ever grow:
// a released migration is never edited.
var migrations = [][]string{
	{ // 1: records, events, the revision counter (shared by every namespace until version 2)
		`INSERT INTO state_meta (name, value) VALUES ('revision', 0)`,
		`CREATE TABLE state_records (
			ns         TEXT    NOT NULL,
			key        TEXT    NOT NULL,
			value      BLOB    NOT NULL,
			writer     TEXT    NOT NULL,
			rev        INTEGER NOT NULL,
			crev       INTEGER NOT NULL,
			updated_at INTEGER NOT NULL, -- Unix ms
			expires_at INTEGER,          -- Unix ms; NULL: never
			PRIMARY KEY (ns, key)
		) WITHOUT ROWID`,
		`CREATE INDEX state_records_expiry ON state_records (expires_at) WHERE expires_at IS NOT NULL`,
		`CREATE TABLE state_events (
			id     INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, not even after a reset
			ns     TEXT    NOT NULL,
			rev    INTEGER NOT NULL,
			key    TEXT    NOT NULL,
			op     TEXT    NOT NULL,
			value  BLOB,
			prev   BLOB,
			writer TEXT    NOT NULL,
			at     INTEGER NOT NULL -- Unix ms
		)`,
		`CREATE INDEX state_events_ns ON state_events (ns, id)`,
		`CREATE INDEX state_events_key ON state_events (ns, key, id)`,
		`CREATE INDEX state_events_at ON state_events (at)`,
	},
	{ // 2: revisions and event ids per namespace, so that no tenant sees another's write rate
		`CREATE TABLE state_namespaces (
			ns    TEXT    PRIMARY KEY,
			rev   INTEGER NOT NULL, -- the namespace's last revision
			event INTEGER NOT NULL  -- the namespace's last event id
		) WITHOUT ROWID`,
		// A namespace's counters start above everything the shared counters
		// of version 1 handed out (state_meta 'revision' and this floor stay
		// as they are from now on), so no revision or event id is reused.
		`INSERT INTO state_meta (name, value) VALUES ('event_floor',
			coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'state_events'), 0))`,
		`INSERT INTO state_namespaces (ns, rev, event)
			SELECT ns, (SELECT value FROM state_meta WHERE name = 'revision'),
				(SELECT value FROM state_meta WHERE name = 'event_floor')
			FROM (SELECT ns FROM state_records UNION SELECT ns FROM state_events)`,
		`ALTER TABLE state_events ADD COLUMN seq INTEGER NOT NULL DEFAULT 0`, // the event id within its namespace
		`UPDATE state_events SET seq = id`,
		`DROP INDEX state_events_ns`,
		`DROP INDEX state_events_key`,
		`CREATE INDEX state_events_ns ON state_events (ns, seq)`,
		`CREATE INDEX state_events_key ON state_events (ns, key, seq)`,
	},
	{ // 3: no index of events by time: trimming by age walks them oldest first by id
		`DROP INDEX IF EXISTS state_events_at`,
	},
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// migrate creates or upgrades the schema in one write transaction, so that
// processes opening the same new file at once agree. Unless besidePython is
// set, it refuses a Python sidecar's database (see ErrPythonDatabase)
// before it creates anything.
func migrate(ctx context.Context, db *sql.DB, besidePython bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if !besidePython {
		if err := checkPython(ctx, tx); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS state_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID`); err != nil {
		return fmt.Errorf("create state_meta: %w", err)
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT value FROM state_meta WHERE name = 'schema_version'`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return fmt.Errorf("database schema version %d is newer than this library's (%d): upgrade the library", v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		for _, stmt := range migrations[v] {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migrate to schema version %d: %w", v+1, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO state_meta (name, value) VALUES ('schema_version', ?)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, v); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit()
}
