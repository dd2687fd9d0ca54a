// Package pythontest builds the data of a Python MCP State Sidecar
// (mcp-state-sidecar 0.1.0) for the tests of the importer: a SQLite file
// with exactly the Python schema (reference python-sidecar.md §7.1) and rows
// as the Python tools write them, or the Python key layout in a Redis
// (§7.2); and it checks that a store holds everything the importer must
// bring over.
package pythontest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// Schema is the Python sidecar's SQLite schema, as its sqlite_backend.py
// creates it on start (no migrations, no secondary indexes).
var Schema = []string{
	`PRAGMA journal_mode=WAL`,
	`PRAGMA foreign_keys=ON`,
	`CREATE TABLE IF NOT EXISTS kv_store (
		key        TEXT PRIMARY KEY,
		value_json TEXT NOT NULL,
		expires_at REAL
	)`,
	`CREATE TABLE IF NOT EXISTS leases (
		resource_id TEXT PRIMARY KEY,
		holder_id   TEXT NOT NULL,
		expires_at  REAL NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS workflows (
		run_id     TEXT PRIMARY KEY,
		name       TEXT NOT NULL,
		status     TEXT NOT NULL DEFAULT 'created',
		tags_json  TEXT NOT NULL DEFAULT '{}',
		agent_id   TEXT,
		last_step  INTEGER NOT NULL DEFAULT 0,
		created_at REAL NOT NULL,
		updated_at REAL NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS step_outputs (
		run_id      TEXT NOT NULL,
		step        INTEGER NOT NULL,
		output_json TEXT NOT NULL,
		PRIMARY KEY (run_id, step)
	)`,
	`CREATE TABLE IF NOT EXISTS history (
		id                  INTEGER PRIMARY KEY AUTOINCREMENT,
		key                 TEXT NOT NULL,
		new_value_json      TEXT NOT NULL,
		previous_value_json TEXT,
		agent_id            TEXT,
		written_at          REAL NOT NULL
	)`,
	`CREATE TABLE IF NOT EXISTS sessions (
		session_id   TEXT PRIMARY KEY,
		context_json TEXT NOT NULL,
		saved_at     REAL NOT NULL,
		updated_at   REAL NOT NULL
	)`,
}

// An Entry is a row of kv_store: its JSON as json.dumps wrote it, and its
// expiry in epoch seconds (0: none).
type Entry struct {
	Key, JSON string
	ExpiresAt float64
}

// A Run is a row of workflows with its step outputs. Agent "" is NULL.
type Run struct {
	ID, Name, Status, TagsJSON, Agent string
	LastStep                          int64
	CreatedAt, UpdatedAt              float64
	Outputs                           map[int64]string
}

// An Output is a row of step_outputs.
type Output struct {
	RunID string
	Step  int64
	JSON  string
}

// A Session is a row of sessions.
type Session struct {
	ID, JSON           string
	SavedAt, UpdatedAt float64
}

// A Lease is a row of leases.
type Lease struct {
	Resource, Holder string
	ExpiresAt        float64
}

// A History is a row of history; Prev and Agent "" are NULL.
type History struct {
	ID                    int64
	Key, New, Prev, Agent string
	WrittenAt             float64
}

// A Fixture is the data of a Python sidecar.
type Fixture struct {
	// Now is when the fixture's expiries were counted from.
	Now      time.Time
	Entries  []Entry
	Runs     []Run
	Orphans  []Output // outputs of runs that do not exist
	Sessions []Session
	Leases   []Lease
	History  []History
	// Dangling are ids in the Redis set wf:index without a wf:meta key.
	Dangling []string
}

// T0 is when the fixture's Python sidecar started writing.
const T0 = 1718000000

// Standard returns a fixture with a record of every kind in every state
// the Python tools can leave it in: entries with and without expiry, one
// expired, JSON null, an integer beyond 2^53 and ASCII-escaped text; runs
// created, claimed, running (with and without an agent), done and failed,
// with outputs, and an orphan output; sessions; a live and an expired lease;
// history with and without previous values and agents. now is the wall
// clock the expiries count from.
func Standard(now time.Time) *Fixture {
	n := float64(now.Unix())
	return &Fixture{
		Now: now,
		Entries: []Entry{
			{Key: "shared:pr-review:42:diff", JSON: `{"files": ["a.go", "b.go"], "lines": 120}`},
			{Key: "cache:token", JSON: `"abc"`, ExpiresAt: n + 3600},
			{Key: "gone", JSON: `1`, ExpiresAt: n - 10},
			{Key: "caf\u00e9", JSON: `"cr\u00e8me \ud83c\udf70"`},
			{Key: "nothing", JSON: `null`},
			{Key: "big", JSON: `[12345678901234567890, 1.5, -0.0]`},
		},
		Runs: []Run{
			{ID: "wf-0000000000c1", Name: "pr-review-41", Status: "created", TagsJSON: `{"pipeline": "pr-review", "pr": "41"}`,
				CreatedAt: T0 + 0.125, UpdatedAt: T0 + 0.125},
			{ID: "wf-0000000000c2", Name: "pr-review-42", Status: "claimed", TagsJSON: `{"pipeline": "pr-review", "pr": "42"}`,
				Agent: "worker-a", CreatedAt: T0 + 1.5, UpdatedAt: T0 + 2.75},
			{ID: "wf-0000000000c3", Name: "pr-review-43", Status: "running", TagsJSON: `{"pipeline": "pr-review", "pr": "43"}`,
				Agent: "worker-a", LastStep: 2, CreatedAt: T0 + 3, UpdatedAt: T0 + 60.5,
				Outputs: map[int64]string{1: `{"files": 12}`, 2: `{"lint_findings": [{"line": 3, "msg": "unused"}]}`}},
			{ID: "wf-0000000000c4", Name: "nightly", Status: "running", TagsJSON: `{}`, LastStep: 1,
				CreatedAt: T0 + 4, UpdatedAt: T0 + 5, Outputs: map[int64]string{1: `"started"`}},
			{ID: "wf-0000000000c5", Name: "pr-review-40", Status: "done", TagsJSON: `{"pipeline": "pr-review", "pr": "40"}`,
				Agent: "worker-b", LastStep: 3, CreatedAt: T0 - 100, UpdatedAt: T0 - 10,
				Outputs: map[int64]string{1: `1`, 2: `2`, 3: `{"summary": "LGTM"}`}},
			{ID: "wf-0000000000c6", Name: "broken", Status: "failed", TagsJSON: `{"pipeline": "other"}`, CreatedAt: T0 - 50, UpdatedAt: T0 - 40},
		},
		Orphans: []Output{{RunID: "wf-00000000dead", Step: 1, JSON: `{"lost": true}`}},
		Sessions: []Session{
			{ID: "worker-a:pr-42", JSON: `{"llm_context": "reviewing a.go", "next": "security review"}`, SavedAt: T0 + 200, UpdatedAt: T0 + 300},
			{ID: "empty", JSON: `{}`, SavedAt: T0 + 5, UpdatedAt: T0 + 5},
		},
		Leases: []Lease{
			{Resource: "pr:42:comment-thread", Holder: "worker-a", ExpiresAt: n + 600.25},
			{Resource: "stale", Holder: "worker-z", ExpiresAt: n - 100},
		},
		History: []History{
			{ID: 1, Key: "shared:pr-review:42:diff", New: `{"files": ["a.go"]}`, Agent: "orchestrator", WrittenAt: T0},
			{ID: 2, Key: "cache:token", New: `"abc"`, Agent: "worker-a", WrittenAt: T0 + 30},
			{ID: 3, Key: "shared:pr-review:42:diff", New: `{"files": ["a.go", "b.go"], "lines": 120}`, Prev: `{"files": ["a.go"]}`, Agent: "orchestrator", WrittenAt: T0 + 60},
			{ID: 7, Key: "deleted", New: `true`, WrittenAt: T0 + 60},
			{ID: 8, Key: "gone", New: `1`, Agent: "worker-b", WrittenAt: T0 + 90},
		},
		Dangling: []string{"wf-00000000beef"},
	}
}

// CreateSQLite creates a Python sidecar database at path with the schema
// and no rows.
func CreateSQLite(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	for _, q := range Schema {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// WriteSQLite writes the fixture into a new Python sidecar database at
// path. The file is closed when it returns.
func (f *Fixture) WriteSQLite(t testing.TB, path string) {
	t.Helper()
	db := CreateSQLite(t, path)
	defer db.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, e := range f.Entries {
		exec(`INSERT INTO kv_store (key, value_json, expires_at) VALUES (?, ?, ?)`, e.Key, e.JSON, nullFloat(e.ExpiresAt))
	}
	for _, r := range f.Runs {
		exec(`INSERT INTO workflows (run_id, name, status, tags_json, agent_id, last_step, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Name, r.Status, r.TagsJSON, nullString(r.Agent), r.LastStep, r.CreatedAt, r.UpdatedAt)
		for _, s := range slices.Sorted(maps.Keys(r.Outputs)) {
			exec(`INSERT INTO step_outputs (run_id, step, output_json) VALUES (?, ?, ?)`, r.ID, s, r.Outputs[s])
		}
	}
	for _, o := range f.Orphans {
		exec(`INSERT INTO step_outputs (run_id, step, output_json) VALUES (?, ?, ?)`, o.RunID, o.Step, o.JSON)
	}
	for _, s := range f.Sessions {
		exec(`INSERT INTO sessions (session_id, context_json, saved_at, updated_at) VALUES (?, ?, ?, ?)`, s.ID, s.JSON, s.SavedAt, s.UpdatedAt)
	}
	for _, l := range f.Leases {
		exec(`INSERT INTO leases (resource_id, holder_id, expires_at) VALUES (?, ?, ?)`, l.Resource, l.Holder, l.ExpiresAt)
	}
	for _, h := range f.History {
		exec(`INSERT INTO history (id, key, new_value_json, previous_value_json, agent_id, written_at) VALUES (?, ?, ?, ?, ?, ?)`,
			h.ID, h.Key, h.New, nullString(h.Prev), nullString(h.Agent), h.WrittenAt)
	}
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullFloat(f float64) any {
	if f == 0 {
		return nil
	}
	return f
}

// WriteRedis writes the fixture in the Python sidecar's Redis layout:
// kv:{key} (with its remaining TTL), wf:meta:{run_id} (WorkflowMeta as
// Pydantic's model_dump_json writes it), wf:index, wf:step:{run_id}:{step},
// session:{id} and lease:{resource} (with its remaining TTL). Expired
// entries and leases are left out, as Redis would have dropped them; Redis
// keeps no history. The Python layout has fixed key names: rdb must be a
// database of the test's own.
func (f *Fixture) WriteRedis(t testing.TB, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	now := float64(time.Now().UnixNano()) / 1e9
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range f.Entries {
			switch {
			case e.ExpiresAt == 0:
				p.Set(ctx, "kv:"+e.Key, e.JSON, 0)
			case e.ExpiresAt > now:
				p.Set(ctx, "kv:"+e.Key, e.JSON, time.Duration((e.ExpiresAt-now)*1e9))
			}
		}
		for _, r := range f.Runs {
			p.Set(ctx, "wf:meta:"+r.ID, r.MetaJSON(), 0)
			p.SAdd(ctx, "wf:index", r.ID)
			for s, o := range r.Outputs {
				p.Set(ctx, "wf:step:"+r.ID+":"+strconv.FormatInt(s, 10), o, 0)
			}
		}
		for _, o := range f.Orphans {
			p.Set(ctx, "wf:step:"+o.RunID+":"+strconv.FormatInt(o.Step, 10), o.JSON, 0)
		}
		for _, id := range f.Dangling {
			p.SAdd(ctx, "wf:index", id)
		}
		for _, s := range f.Sessions {
			p.Set(ctx, "session:"+s.ID, s.JSON, 0)
		}
		for _, l := range f.Leases {
			if l.ExpiresAt > now {
				v := fmt.Sprintf(`{"holder_id": %q, "expires_at": %s}`, l.Holder, strconv.FormatFloat(l.ExpiresAt, 'f', -1, 64))
				p.Set(ctx, "lease:"+l.Resource, v, time.Duration((l.ExpiresAt-now)*1e9))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// MetaJSON is the run as the Python Redis backend stores it:
// WorkflowMeta.model_dump_json(), compact, fields in model order.
func (r Run) MetaJSON() string {
	var tags bytes.Buffer
	_ = json.Compact(&tags, []byte(r.TagsJSON))
	agent := "null"
	if r.Agent != "" {
		agent = strconv.Quote(r.Agent)
	}
	return fmt.Sprintf(`{"run_id":%q,"name":%q,"status":%q,"tags":%s,"agent_id":%s,"last_step":%d,"created_at":%s,"updated_at":%s}`,
		r.ID, r.Name, r.Status, tags.String(), agent, r.LastStep, pyFloat(r.CreatedAt), pyFloat(r.UpdatedAt))
}

// pyFloat writes a float as Python's repr does for these values (with .0
// for whole numbers).
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !bytes.ContainsRune([]byte(s), '.') {
		s += ".0"
	}
	return s
}
