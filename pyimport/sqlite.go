package pyimport

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/statesidecar/state"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// pythonSchema lists the Python sidecar's tables with the columns the
// importer reads.
var pythonSchema = map[string][]string{
	"kv_store":     {"key", "value_json", "expires_at"},
	"workflows":    {"run_id", "name", "status", "tags_json", "agent_id", "last_step", "created_at", "updated_at"},
	"step_outputs": {"run_id", "step", "output_json"},
	"leases":       {"resource_id", "holder_id", "expires_at"},
	"sessions":     {"session_id", "context_json", "saved_at", "updated_at"},
	"history":      {"id", "key", "new_value_json", "previous_value_json", "agent_id", "written_at"},
}

// sqliteReader reads a Python sidecar's SQLite file.
type sqliteReader struct {
	path string
	db   *sql.DB
}

// OpenSQLite opens the Python sidecar's SQLite file at path, read-only: the
// import never changes it. A file that is not a SQLite database, or lacks a
// table or column of the Python schema, is an error wrapping ErrNotPython
// that names what is missing.
func OpenSQLite(ctx context.Context, path string) (*Source, error) {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pyimport: %w", err)
	case fi.IsDir():
		return nil, fmt.Errorf("pyimport: %s is a directory, not a Python sidecar's SQLite file", path)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("pyimport: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(2)
	r := &sqliteReader{path: path, db: db}
	if err := r.checkSchema(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return &Source{r: r, path: path}, nil
}

// checkSchema checks that the file has the Python sidecar's tables.
func (r *sqliteReader) checkSchema(ctx context.Context) error {
	rows, err := r.db.QueryContext(ctx, `SELECT m.name, p.name FROM sqlite_master AS m, pragma_table_info(m.name) AS p WHERE m.type = 'table'`)
	if err != nil {
		if strings.Contains(err.Error(), "not a database") {
			return fmt.Errorf("pyimport: %s: %w: it is not a SQLite database (%v)", r.path, ErrNotPython, err)
		}
		return fmt.Errorf("pyimport: read the tables of %s: %w", r.path, err)
	}
	defer rows.Close()
	cols := map[string][]string{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return fmt.Errorf("pyimport: read the tables of %s: %w", r.path, err)
		}
		cols[t] = append(cols[t], c)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pyimport: read the tables of %s: %w", r.path, err)
	}
	var missing []string
	for _, t := range slices.Sorted(maps.Keys(pythonSchema)) {
		have, ok := cols[t]
		if !ok {
			missing = append(missing, "table "+t)
			continue
		}
		for _, c := range pythonSchema[t] {
			if !slices.Contains(have, c) {
				missing = append(missing, "column "+t+"."+c)
			}
		}
	}
	if len(missing) > 0 {
		tables := slices.Sorted(maps.Keys(cols))
		if len(tables) == 0 {
			tables = []string{"none"}
		}
		return fmt.Errorf("pyimport: %s: %w: it lacks %s (its tables: %s)",
			r.path, ErrNotPython, strings.Join(missing, ", "), strings.Join(tables, ", "))
	}
	return nil
}

func (r *sqliteReader) String() string { return fmt.Sprintf("Python sidecar SQLite file %q", r.path) }

func (r *sqliteReader) close() error { return r.db.Close() }

func (r *sqliteReader) count(ctx context.Context) (map[Kind]int, error) {
	out := map[Kind]int{}
	for k, t := range map[Kind]string{History: "history", Keys: "kv_store", Sessions: "sessions", Leases: "leases",
		Runs: "workflows", Outputs: "step_outputs"} {
		var n int
		if err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM `+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("pyimport: count the rows of %s: %w", t, err)
		}
		out[k] = n
	}
	return out, nil
}

// historySource names the history log by its first row, so that the log of
// another Python database (whose ids also start at 1), or of this one after
// a sidecar_reset, is another source.
func (r *sqliteReader) historySource(ctx context.Context) (string, error) {
	var id int64
	var key, val string
	var at float64
	err := r.db.QueryRowContext(ctx, `SELECT id, key, new_value_json, written_at FROM history ORDER BY id LIMIT 1`).Scan(&id, &key, &val, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pyimport: read the history: %w", err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%d\x00%s\x00%s\x00%v", id, key, val, at))
	return "python-sqlite-" + hex.EncodeToString(sum[:8]), nil
}

func (r *sqliteReader) historyUpTo(ctx context.Context, seq int64) (int, error) {
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM history WHERE id <= ?`, seq).Scan(&n)
	return n, err
}

func (r *sqliteReader) history(ctx context.Context, after int64, fn func([]item[state.ImportedEvent]) error) error {
	for {
		var page []item[state.ImportedEvent]
		err := r.query(ctx, `SELECT id, key, new_value_json, previous_value_json, agent_id, written_at FROM history
			WHERE id > ? ORDER BY id LIMIT ?`, []any{after, batchSize}, func(rows *sql.Rows) error {
			var e state.ImportedEvent
			var val string
			var prev, agent sql.NullString
			var rawAt any
			if err := rows.Scan(&e.Seq, &e.Key, &val, &prev, &agent, &rawAt); err != nil {
				return err
			}
			at, problem := pySeconds("history.written_at", rawAt)
			e.Op, e.Value, e.AgentID, e.Time = "kv.set", []byte(val), agent.String, pyTime(at)
			if prev.String != "" {
				e.Prev = []byte(prev.String)
			}
			page = append(page, item[state.ImportedEvent]{id: fmt.Sprint(e.Seq), rec: e, problem: problem})
			return nil
		})
		if err != nil || len(page) == 0 {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		after = page[len(page)-1].rec.Seq
	}
}

func (r *sqliteReader) entries(ctx context.Context, fn func([]item[state.ImportedEntry]) error) error {
	// The writer and time of a key's value are those of its last history
	// row, when that row wrote the value the key holds.
	last := map[string]int64{}
	err := r.query(ctx, `SELECT h.key, max(h.id) FROM history AS h JOIN kv_store AS k ON k.key = h.key GROUP BY h.key`, nil,
		func(rows *sql.Rows) error {
			var k string
			var id int64
			err := rows.Scan(&k, &id)
			last[k] = id
			return err
		})
	if err != nil {
		return err
	}
	return pages(r, ctx, "kv_store", "key", "key, value_json, expires_at", func(rows *sql.Rows) (item[state.ImportedEntry], error) {
		var e state.ImportedEntry
		var val string
		var rawExp any
		if err := rows.Scan(&e.Key, &val, &rawExp); err != nil {
			return item[state.ImportedEntry]{}, err
		}
		e.Value = []byte(val)
		it := item[state.ImportedEntry]{id: e.Key}
		if rawExp != nil {
			exp, problem := pySeconds("kv_store.expires_at", rawExp)
			e.TTL, it.expired, it.problem = 0, problem == "", problem
			if ttl, live := remaining(exp, time.Now()); live && problem == "" {
				e.TTL, it.expired = ttl, false
			}
		}
		it.rec = e
		return it, nil
	}, func(page []item[state.ImportedEntry]) error {
		if err := r.writers(ctx, page, last); err != nil {
			return err
		}
		return fn(page)
	})
}

// writers sets the writer and time of the entries of page from their last
// history rows.
func (r *sqliteReader) writers(ctx context.Context, page []item[state.ImportedEntry], last map[string]int64) error {
	ids := make([]any, 0, len(page))
	for _, it := range page {
		if id, ok := last[it.id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	type write struct {
		agent, val string
		at         any
	}
	writes := map[string]write{}
	err := r.query(ctx, `SELECT key, agent_id, written_at, new_value_json FROM history WHERE id IN (`+marks(len(ids))+`)`, ids,
		func(rows *sql.Rows) error {
			var k string
			var w write
			var agent sql.NullString
			err := rows.Scan(&k, &agent, &w.at, &w.val)
			w.agent = agent.String
			writes[k] = w
			return err
		})
	if err != nil {
		return err
	}
	for i := range page {
		e := &page[i].rec
		if w, ok := writes[e.Key]; ok && w.val == string(e.Value) {
			at, problem := pySeconds("history.written_at", w.at)
			if problem == "" { // else the history row is refused on its own
				e.AgentID, e.UpdatedAt = w.agent, pyTime(at)
			}
		}
	}
	return nil
}

func (r *sqliteReader) sessions(ctx context.Context, fn func([]item[state.ImportedSession]) error) error {
	return pages(r, ctx, "sessions", "session_id", "session_id, context_json, updated_at", func(rows *sql.Rows) (item[state.ImportedSession], error) {
		var s state.ImportedSession
		var val string
		var rawAt any
		err := rows.Scan(&s.ID, &val, &rawAt)
		at, problem := pySeconds("sessions.updated_at", rawAt)
		s.Context, s.UpdatedAt = []byte(val), pyTime(at)
		return item[state.ImportedSession]{id: s.ID, rec: s, problem: problem}, err
	}, fn)
}

func (r *sqliteReader) leases(ctx context.Context, fn func([]item[state.ImportedLease]) error) error {
	return pages(r, ctx, "leases", "resource_id", "resource_id, holder_id, expires_at", func(rows *sql.Rows) (item[state.ImportedLease], error) {
		var l state.ImportedLease
		var rawExp any
		err := rows.Scan(&l.Resource, &l.Holder, &rawExp)
		exp, problem := pySeconds("leases.expires_at", rawExp)
		ttl, live := remaining(exp, time.Now())
		l.TTL = ttl
		return item[state.ImportedLease]{id: l.Resource, rec: l, expired: !live && problem == "", problem: problem}, err
	}, fn)
}

func (r *sqliteReader) runs(ctx context.Context, fn func([]item[state.ImportedRun]) error) error {
	return pages(r, ctx, "workflows", "run_id", "run_id, name, status, tags_json, agent_id, last_step, created_at, updated_at",
		func(rows *sql.Rows) (item[state.ImportedRun], error) {
			var id, name, status, tags string
			var agent sql.NullString
			var rawLast, rawCreated, rawUpdated any
			if err := rows.Scan(&id, &name, &status, &tags, &agent, &rawLast, &rawCreated, &rawUpdated); err != nil {
				return item[state.ImportedRun]{}, err
			}
			var ap *string
			if agent.Valid {
				ap = &agent.String
			}
			last, ok := rawLast.(int64)
			created, problem := pySeconds("workflows.created_at", rawCreated)
			updated, problem2 := pySeconds("workflows.updated_at", rawUpdated)
			switch {
			case !ok:
				problem = fmt.Sprintf("workflows.last_step %v is not a whole number", rawLast)
			case problem == "":
				problem = problem2
			}
			var run state.ImportedRun
			if problem == "" {
				run, problem = pyRun("workflows.", id, name, status, tags, ap, last, created, updated)
			}
			run.ID = id
			return item[state.ImportedRun]{id: id, rec: run, problem: problem}, nil
		}, func(page []item[state.ImportedRun]) error {
			if err := r.outputs(ctx, page); err != nil {
				return err
			}
			return fn(page)
		})
}

// outputs reads the step outputs of the runs of page.
func (r *sqliteReader) outputs(ctx context.Context, page []item[state.ImportedRun]) error {
	ids := make([]any, len(page))
	at := make(map[string]int, len(page))
	for i, it := range page {
		ids[i], at[it.id] = it.id, i
	}
	return r.query(ctx, `SELECT run_id, step, output_json FROM step_outputs WHERE run_id IN (`+marks(len(ids))+`) ORDER BY run_id, step`, ids,
		func(rows *sql.Rows) error {
			var id, out string
			var step int64
			if err := rows.Scan(&id, &step, &out); err != nil {
				return err
			}
			run := &page[at[id]].rec
			run.Outputs = append(run.Outputs, state.StepOutput{Step: step, Output: []byte(out)})
			return nil
		})
}

func (r *sqliteReader) skipped(ctx context.Context) (int, []string, error) {
	var n int
	err := r.db.QueryRowContext(ctx, `SELECT count(*) FROM step_outputs WHERE run_id NOT IN (SELECT run_id FROM workflows)`).Scan(&n)
	if err != nil {
		return 0, nil, fmt.Errorf("pyimport: count the step outputs of unknown runs: %w", err)
	}
	if n == 0 {
		return 0, nil, nil
	}
	return n, []string{fmt.Sprintf("%d step outputs belong to no run (the Python sidecar accepted checkpoints of unknown runs): not imported", n)}, nil
}

func (r *sqliteReader) notes() []string { return nil }

// pages reads table by ascending key column, batchSize rows at a time,
// turning each row into an item with scan, and calls fn with each page
// once its rows are closed (fn may write to the same file).
func pages[T any](r *sqliteReader, ctx context.Context, table, key, cols string,
	scan func(*sql.Rows) (item[T], error), fn func([]item[T]) error) error {
	var after *string
	for {
		q := `SELECT ` + cols + ` FROM ` + table
		args := []any{}
		if after != nil {
			q += ` WHERE ` + key + ` > ?`
			args = append(args, *after)
		}
		q += ` ORDER BY ` + key + ` LIMIT ?`
		var page []item[T]
		err := r.query(ctx, q, append(args, batchSize), func(rows *sql.Rows) error {
			it, err := scan(rows)
			page = append(page, it)
			return err
		})
		if err != nil || len(page) == 0 {
			return err
		}
		if err := fn(page); err != nil {
			return err
		}
		if len(page) < batchSize {
			return nil
		}
		last := page[len(page)-1].id
		after = &last
	}
}

// query runs q and calls each for every row.
func (r *sqliteReader) query(ctx context.Context, q string, args []any, each func(*sql.Rows) error) error {
	rows, err := r.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("pyimport: read %s: %w", r.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return fmt.Errorf("pyimport: read %s: %w", r.path, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pyimport: read %s: %w", r.path, err)
	}
	return nil
}

// marks returns n comma-separated placeholders.
func marks(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }
