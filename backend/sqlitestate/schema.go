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
	{ // 1: records, events, the revision counter
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
}

// SchemaVersion is the schema version this package writes.
var SchemaVersion = len(migrations)

// migrate creates or upgrades the schema in one write transaction, so that
// processes opening the same new file at once agree.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
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
