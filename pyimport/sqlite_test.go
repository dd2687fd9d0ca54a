package pyimport_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/pythontest"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/pyimport"
)

// open opens a source or fails the test.
func open(t *testing.T, src string) *pyimport.Source {
	t.Helper()
	s, err := pyimport.Open(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// standardSQLite writes the standard Python fixture, as of now, to a
// SQLite file of the Python sidecar's, and returns it with the file's path.
func standardSQLite(t *testing.T) (*pythontest.Fixture, string) {
	t.Helper()
	f := pythontest.Standard(time.Now())
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	f.WriteSQLite(t, path)
	return f, path
}

// want checks the counts of a report, kind by kind.
func want(t *testing.T, rep *pyimport.Report, counts map[pyimport.Kind]pyimport.Count) {
	t.Helper()
	for _, k := range pyimport.Kinds {
		if got := *rep.Counts[k]; got != counts[k] {
			t.Errorf("%s: %+v, want %+v", k, got, counts[k])
		}
	}
	if t.Failed() {
		t.Logf("problems %v, notes %v", rep.Problems, rep.Notes)
	}
}

// TestImportSQLite imports the Python fixture's SQLite file into every
// backend, twice: everything arrives the first time, nothing is duplicated
// or written the second time, and the Python file is not changed.
func TestImportSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		f, path := standardSQLite(t)
		before, _ := os.ReadFile(path)
		st, err := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1}).Namespace("imported")
		if err != nil {
			t.Fatal(err)
		}
		var progress []pyimport.Progress
		rep, err := pyimport.Import(ctx, open(t, path), st, &pyimport.Options{Progress: func(p pyimport.Progress) { progress = append(progress, p) }})
		if err != nil {
			t.Fatal(err)
		}
		want(t, rep, map[pyimport.Kind]pyimport.Count{
			pyimport.History:  {Found: 5, Imported: 5},
			pyimport.Keys:     {Found: 6, Imported: 5, Expired: 1},
			pyimport.Sessions: {Found: 2, Imported: 2},
			pyimport.Leases:   {Found: 2, Imported: 1, Expired: 1},
			pyimport.Runs:     {Found: 6, Imported: 6},
			pyimport.Outputs:  {Found: 7, Imported: 6, Skipped: 1},
		})
		if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "1 step outputs belong to no run") {
			t.Errorf("notes %q", rep.Notes)
		}
		if !rep.OldestEvent.Equal(time.Unix(pythontest.T0, 0)) {
			t.Errorf("oldest event %v", rep.OldestEvent)
		}
		if len(progress) == 0 || progress[len(progress)-1] != (pyimport.Progress{Kind: pyimport.Runs, Done: 6, Total: 6}) {
			t.Errorf("progress %+v", progress)
		}
		f.Check(t, st, pythontest.FromSQLite)
		h1, _ := st.Health(ctx)

		rep, err = pyimport.Import(ctx, open(t, path), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		want(t, rep, map[pyimport.Kind]pyimport.Count{
			pyimport.History:  {Found: 5, Present: 5},
			pyimport.Keys:     {Found: 6, Present: 5, Expired: 1},
			pyimport.Sessions: {Found: 2, Present: 2},
			pyimport.Leases:   {Found: 2, Present: 1, Expired: 1},
			pyimport.Runs:     {Found: 6, Present: 6},
			pyimport.Outputs:  {Found: 7, Present: 6, Skipped: 1},
		})
		f.Check(t, st, pythontest.FromSQLite)
		if h2, _ := st.Health(ctx); h2.Events != h1.Events {
			t.Errorf("a second import added %d history events", h2.Events-h1.Events)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("the import changed the Python file")
		}
		// A run left running by a Python worker is crash recovery: any
		// agent takes it over at once (through the backend's native claim,
		// where it has one), keeping its last step.
		c, err := st.ClaimRun(ctx, "wf-0000000000c3", "replacement")
		if err != nil || !c.Reclaimed || c.Attempt != 2 || c.Fence != 2 || c.Run.LastStep != 2 {
			t.Errorf("claiming an imported running run: %+v, %v", c, err)
		}
	})
}

// TestImportSQLiteNewHistoryOnly: rows the Python sidecar wrote after an
// import are what a second import appends; an entry that changed in Python
// since is kept as the store has it.
func TestImportSQLiteNewHistoryOnly(t *testing.T) {
	ctx := context.Background()
	_, path := standardSQLite(t)
	st := storetest.Open(t, "mem://", nil)
	if _, err := pyimport.Import(ctx, open(t, path), st, nil); err != nil {
		t.Fatal(err)
	}
	db, _ := sql.Open("sqlite", "file:"+path)
	for _, q := range []string{
		`INSERT INTO history (key, new_value_json, previous_value_json, agent_id, written_at) VALUES ('nothing', '5', NULL, 'late', 1718000500)`,
		`UPDATE kv_store SET value_json = '5' WHERE key = 'nothing'`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	rep, err := pyimport.Import(ctx, open(t, path), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := *rep.Counts[pyimport.History]; c != (pyimport.Count{Found: 6, Imported: 1, Present: 5}) {
		t.Errorf("history of the second import %+v", c)
	}
	evs, _ := st.History(ctx, state.HistoryQuery{Key: "nothing"})
	if len(evs) != 2 || evs[0].AgentID != "late" || evs[1].Op != "kv.import" {
		t.Errorf("history of the key %+v", evs)
	}
	if e, _ := st.Get(ctx, "nothing"); string(e.Value) != "null" {
		t.Errorf("a second import overwrote an entry with %s", e.Value)
	}
}

// TestImportSQLiteRefusesWhatTheStoreRefuses: records the store cannot
// hold are listed with the reason, and the others arrive.
func TestImportSQLiteRefusesWhatTheStoreRefuses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	db := pythontest.CreateSQLite(t, path)
	for _, q := range []string{
		`INSERT INTO kv_store VALUES ('', '1', NULL), ('ok', '1', NULL), ('large', '"` + strings.Repeat("x", 100) + `"', NULL), ('bad', '{nope', NULL)`,
		`INSERT INTO workflows VALUES ('wf-1', 'ok', 'running', '{}', 'a', 1, 1718000000, 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-2', 'neg', 'running', '{}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-3', 'odd', 'paused', '{}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-4', 'tags', 'created', '{"n": 1}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-5', '', 'created', '{}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO step_outputs VALUES ('wf-1', 1, '1'), ('wf-2', -1, '"before the first step"'), ('wf-2', 0, '0')`,
		`INSERT INTO sessions VALUES ('s', '[1, 2]', 1718000000, 1718000000)`,
		`INSERT INTO history (key, new_value_json, written_at) VALUES ('k', '1', 1718000000), ('', '2', 1718000001), ('k', '3', 1718000002)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	st := storetest.Open(t, "mem://", &state.Options{Limits: state.Limits{MaxValueBytes: 64}})
	rep, err := pyimport.Import(ctx, open(t, path), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	want(t, rep, map[pyimport.Kind]pyimport.Count{
		pyimport.History:  {Found: 3, Imported: 2, Refused: 1},
		pyimport.Keys:     {Found: 4, Imported: 1, Refused: 3},
		pyimport.Sessions: {Found: 1, Refused: 1},
		pyimport.Runs:     {Found: 5, Imported: 1, Refused: 4},
		pyimport.Outputs:  {Found: 3, Imported: 1, Refused: 2},
	})
	got := map[string]string{}
	for _, p := range rep.Problems {
		got[string(p.Kind)+" "+p.ID] = p.Reason
	}
	for id, reason := range map[string]string{
		"keys ":      "key must not be empty",
		"keys large": "value is 102 bytes as JSON, the limit is 64",
		"keys bad":   "value is not valid JSON",
		"runs wf-2":  "outputs[0].step must be between 0 and 2^53, got -1",
		"runs wf-3":  `status "paused" is not one of created, claimed, running, done, failed`,
		"runs wf-4":  "tags {\"n\": 1} are not a JSON object of strings",
		"runs wf-5":  "name must not be empty",
		"sessions s": "context must be a JSON object",
		"history 2":  "key must not be empty",
	} {
		if !strings.HasPrefix(got[id], reason) {
			t.Errorf("problem %q: %q, want %q", id, got[id], reason)
		}
	}
	if rep.Refused() != 11 { // the outputs of refused runs included
		t.Errorf("Refused() = %d", rep.Refused())
	}
	if e, err := st.Get(ctx, "ok"); err != nil || string(e.Value) != "1" {
		t.Errorf("the importable entry beside refused ones: %+v, %v", e, err)
	}
}

// TestImportDryRunWritesNothing: a dry run reports what an import into an
// empty namespace would do, refusals included, without a store.
func TestImportDryRunWritesNothing(t *testing.T) {
	ctx := context.Background()
	_, path := standardSQLite(t)
	rep, err := pyimport.Import(ctx, open(t, path), nil, &pyimport.Options{DryRun: true, Limits: state.Limits{MaxValueBytes: 30}})
	if err != nil {
		t.Fatal(err)
	}
	want(t, rep, map[pyimport.Kind]pyimport.Count{
		pyimport.History:  {Found: 5, Imported: 4, Refused: 1},
		pyimport.Keys:     {Found: 6, Imported: 3, Expired: 1, Refused: 2},
		pyimport.Sessions: {Found: 2, Imported: 1, Refused: 1},
		pyimport.Leases:   {Found: 2, Imported: 1, Expired: 1},
		pyimport.Runs:     {Found: 6, Imported: 5, Refused: 1},
		pyimport.Outputs:  {Found: 7, Imported: 4, Skipped: 1, Refused: 2},
	})
	if !rep.DryRun {
		t.Error("the report does not say it was a dry run")
	}
}

// TestImportSQLiteInPlace: importing a Python file into itself puts the
// store's tables beside Python's, which keep their rows, and the file then
// opens as a store without the option.
func TestImportSQLiteInPlace(t *testing.T) {
	ctx := context.Background()
	f, path := standardSQLite(t)
	d, err := sqlitestate.Open(ctx, path, &sqlitestate.Options{BesidePython: true})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := state.New(d, &state.Options{SweepInterval: -1})
	if _, err := pyimport.Import(ctx, open(t, path), st, nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2, err := state.Open(ctx, "sqlite://"+path)
	if err != nil {
		t.Fatalf("the file after an import in place: %v", err)
	}
	defer st2.Close()
	f.Check(t, st2, pythontest.FromSQLite)
	rep, err := pyimport.Import(ctx, open(t, path), st2, nil)
	if err != nil || rep.Counts[pyimport.Keys].Present != 5 {
		t.Errorf("importing the file again: %+v, %v", rep, err)
	}
}

// TestOpenSQLiteRefusesWhatIsNotPython: a missing file, a directory, a file
// that is not SQLite and a SQLite file without the Python tables (such as
// the store's own) are clear errors, the last two matching ErrNotPython.
func TestOpenSQLiteRefusesWhatIsNotPython(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	_ = os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o600)
	own := filepath.Join(dir, "state.db")
	st, err := state.Open(ctx, "sqlite://"+own)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = st.Set(ctx, "k", 1)
	st.Close()
	half := filepath.Join(dir, "half.db")
	db := pythontest.CreateSQLite(t, half)
	_, _ = db.Exec(`DROP TABLE history`)
	db.Close()
	for _, c := range []struct {
		path, says string
		notPython  bool
	}{
		{filepath.Join(dir, "missing.db"), "no such file", false},
		{dir, "is a directory", false},
		{text, "it is not a SQLite database", true},
		{own, "it lacks table history, table kv_store", true},
		{half, "it lacks table history (its tables: kv_store, leases, sessions, sqlite_sequence, step_outputs, workflows)", true},
	} {
		_, err := pyimport.Open(ctx, c.path)
		if err == nil || !strings.Contains(err.Error(), c.says) || errors.Is(err, pyimport.ErrNotPython) != c.notPython {
			t.Errorf("%s: %v; want an error saying %q (ErrNotPython: %v)", c.path, err, c.says, c.notPython)
		}
	}
}

// TestImportTwiceAtOnce: two imports of the same Python file into the same
// namespace at once (meeting after their first batch, so that the rest of
// them overlaps) write every record exactly once between them: each record
// is imported by one and found by the other, and the store holds the
// fixture exactly (no history entry, run or count twice).
func TestImportTwiceAtOnce(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		f, path := standardSQLite(t)
		st := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1})
		var met sync.WaitGroup
		met.Add(2)
		reps := make([]*pyimport.Report, 2)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range 2 {
			src := open(t, path)
			var once sync.Once
			opts := &pyimport.Options{Progress: func(pyimport.Progress) {
				once.Do(func() { met.Done(); met.Wait() })
			}}
			wg.Go(func() { reps[i], errs[i] = pyimport.Import(ctx, src, st, opts) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		for _, k := range pyimport.Kinds {
			a, b := reps[0].Counts[k], reps[1].Counts[k]
			if a.Imported+b.Imported != a.Imported+a.Present || a.Imported+a.Present != b.Imported+b.Present {
				t.Errorf("%s: the imports wrote %d and %d, found %d and %d already there; want each record written once",
					k, a.Imported, b.Imported, a.Present, b.Present)
			}
		}
		f.Check(t, st, pythontest.FromSQLite)
		evs, _ := st.History(ctx, state.HistoryQuery{Limit: 1000})
		if want := 5 + 5 + 2 + 1 + 6; len(evs) != want {
			t.Errorf("history holds %d events, want %d (the Python rows and one per imported record)", len(evs), want)
		}
	})
}
