package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrPythonDatabase is returned (wrapped) by Open for a file that holds the
// tables of the Python MCP State Sidecar (mcp-state-sidecar 0.1.0) and no
// data of this package: the store keeps its records in tables of its own,
// so opening such a file in place would show an empty store beside the
// Python data. Open then changes nothing in the file. Copy the Python data
// into a store instead, with the state-sidecar import command or package
// pyimport, into this file (Options.BesidePython) or another.
var ErrPythonDatabase = errors.New("the file holds a Python MCP State Sidecar database " +
	"(tables kv_store, workflows, step_outputs, leases, sessions, history) and none of this store's data; " +
	"its data is not read in place: copy it into the store with state-sidecar import")

// pythonTables are columns only the Python sidecar's schema has, by table.
var pythonTables = map[string][]string{
	"kv_store":  {"key", "value_json", "expires_at"},
	"workflows": {"run_id", "name", "status", "tags_json", "agent_id", "last_step", "created_at", "updated_at"},
}

// checkPython returns ErrPythonDatabase when the database holds the Python
// sidecar's tables and this store has never written to it.
func checkPython(ctx context.Context, tx *sql.Tx) error {
	for table, cols := range pythonTables {
		var n int
		err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM pragma_table_info('%s') WHERE name IN (%s)`,
			table, placeholders(len(cols))), anys(cols)...).Scan(&n)
		if err != nil {
			return fmt.Errorf("look for the Python sidecar's tables: %w", err)
		}
		if n != len(cols) {
			return nil
		}
	}
	// A namespace gets a row in state_namespaces at its first commit, which
	// a reset keeps: the store has been used here, whatever it holds now.
	for _, q := range []string{`SELECT EXISTS (SELECT 1 FROM state_namespaces)`, `SELECT EXISTS (SELECT 1 FROM state_records)`} {
		var used bool
		err := tx.QueryRowContext(ctx, q).Scan(&used)
		if err == nil && used {
			return nil
		}
	}
	return ErrPythonDatabase
}

func placeholders(n int) string {
	s := "?"
	for range n - 1 {
		s += ", ?"
	}
	return s
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
