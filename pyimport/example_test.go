package pyimport_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/pyimport"
	_ "modernc.org/sqlite"
)

// Copy a Python sidecar's SQLite file into a store, then again: the second
// import finds everything present and writes nothing.
func ExampleImport() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pyimport")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state_sidecar.db")
	pythonDatabase(path) // what mcp-state-sidecar 0.1.0 left behind

	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	for range 2 {
		src, err := pyimport.Open(ctx, path)
		if err != nil {
			log.Fatal(err)
		}
		rep, err := pyimport.Import(ctx, src, st, nil)
		src.Close()
		if err != nil {
			log.Fatal(err)
		}
		for _, k := range []pyimport.Kind{pyimport.History, pyimport.Keys, pyimport.Runs} {
			c := rep.Counts[k]
			fmt.Printf("%s: %d found, %d imported, %d present\n", k, c.Found, c.Imported, c.Present)
		}
	}
	r, err := st.GetRun(ctx, "wf-3f9a0c1b2d4e")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Name, r.Status, r.AgentID, "claimable:", r.Claimable)
	// Output:
	// history: 1 found, 1 imported, 0 present
	// keys: 1 found, 1 imported, 0 present
	// runs: 1 found, 1 imported, 0 present
	// history: 1 found, 0 imported, 1 present
	// keys: 1 found, 0 imported, 1 present
	// runs: 1 found, 0 imported, 1 present
	// pr-review-42 running worker-a claimable: true
}

// pythonDatabase writes a small Python sidecar database.
func pythonDatabase(path string) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE kv_store (key TEXT PRIMARY KEY, value_json TEXT NOT NULL, expires_at REAL)`,
		`CREATE TABLE leases (resource_id TEXT PRIMARY KEY, holder_id TEXT NOT NULL, expires_at REAL NOT NULL)`,
		`CREATE TABLE workflows (run_id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'created',
			tags_json TEXT NOT NULL DEFAULT '{}', agent_id TEXT, last_step INTEGER NOT NULL DEFAULT 0,
			created_at REAL NOT NULL, updated_at REAL NOT NULL)`,
		`CREATE TABLE step_outputs (run_id TEXT NOT NULL, step INTEGER NOT NULL, output_json TEXT NOT NULL, PRIMARY KEY (run_id, step))`,
		`CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, new_value_json TEXT NOT NULL,
			previous_value_json TEXT, agent_id TEXT, written_at REAL NOT NULL)`,
		`CREATE TABLE sessions (session_id TEXT PRIMARY KEY, context_json TEXT NOT NULL, saved_at REAL NOT NULL, updated_at REAL NOT NULL)`,
		`INSERT INTO kv_store VALUES ('shared:pr-review:42:diff', '{"files": 12}', NULL)`,
		`INSERT INTO history (key, new_value_json, agent_id, written_at) VALUES ('shared:pr-review:42:diff', '{"files": 12}', 'orchestrator', 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-3f9a0c1b2d4e', 'pr-review-42', 'running', '{"pipeline": "pr-review"}', 'worker-a', 1, 1718000000.5, 1718000060.25)`,
		`INSERT INTO step_outputs VALUES ('wf-3f9a0c1b2d4e', 1, '{"files": 12}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			log.Fatal(err)
		}
	}
}
