package pyimport_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statesidecar/state/internal/pythontest"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/pyimport"
)

// Rows the Python sidecar never writes but a hand-edited file may hold (a
// time that is not a number, a time beyond the year 9999) are refused with
// their table, column and key or run id named, and the rest is imported
// (issue 20: one created_at='yesterday' stopped the import of every run,
// naming no run, and an expires_at of 1e20 overflowed and was silently
// dropped as expired). With StopOnProblem the import stops at the first,
// naming it; a second import, without it, continues and imports the rest.
func TestImportBadRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	db := pythontest.CreateSQLite(t, path)
	for _, q := range []string{
		`INSERT INTO kv_store VALUES ('ok', '1', NULL), ('forever', '2', 1e20), ('nan', '3', 'soon'), ('past', '4', 1)`,
		`INSERT INTO workflows VALUES ('wf-1', 'ok', 'created', '{}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-2', 'bad', 'created', '{}', NULL, 0, 'yesterday', 1718000000)`,
		`INSERT INTO workflows VALUES ('wf-3', 'far', 'created', '{}', NULL, 0, 1718000000, -1e300)`,
		`INSERT INTO workflows VALUES ('wf-4', 'ok too', 'created', '{}', NULL, 0, 1718000000, 1718000000)`,
		`INSERT INTO leases VALUES ('r', 'h', 1e20)`,
		`INSERT INTO sessions VALUES ('s', '{}', 1718000000, 'noon')`,
		`INSERT INTO history (key, new_value_json, written_at) VALUES ('k', '1', 1718000000), ('k', '2', 'later'), ('k', '3', 1718000002)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	st := storetest.Open(t, "mem://", nil)

	rep, err := pyimport.Import(ctx, open(t, path), st, &pyimport.Options{StopOnProblem: true})
	if !errors.Is(err, pyimport.ErrProblem) || !strings.Contains(err.Error(), `history "2": history.written_at "later" is not a number of seconds`) {
		t.Fatalf("stopping import: %v; want ErrProblem naming history row 2", err)
	}
	if c := rep.Counts[pyimport.History]; c.Imported != 2 || c.Refused != 1 {
		t.Errorf("the stopped import's history: %+v, want rows 1 and 3 imported and row 2 refused", c)
	}
	if rep.Counts[pyimport.Keys].Imported != 0 {
		t.Errorf("the stopped import went on to the keys: %+v", rep.Counts[pyimport.Keys])
	}

	rep, err = pyimport.Import(ctx, open(t, path), st, nil)
	if err != nil {
		t.Fatalf("import that skips: %v", err)
	}
	got := map[string]string{}
	for _, p := range rep.Problems {
		got[string(p.Kind)+" "+p.ID] = p.Reason
	}
	for id, reason := range map[string]string{
		"keys forever": "kv_store.expires_at 1e+20 is out of range",
		"keys nan":     `kv_store.expires_at "soon" is not a number of seconds`,
		"runs wf-2":    `workflows.created_at "yesterday" is not a number of seconds`,
		"runs wf-3":    "workflows.updated_at -1e+300 is out of range",
		"leases r":     "leases.expires_at 1e+20 is out of range",
		"sessions s":   `sessions.updated_at "noon" is not a number of seconds`,
	} {
		if !strings.HasPrefix(got[id], reason) {
			t.Errorf("problem %q: %q, want %q", id, got[id], reason)
		}
	}
	want(t, rep, map[pyimport.Kind]pyimport.Count{
		pyimport.History:  {Found: 3, Present: 3}, // copied up to row 3 by the first import, row 2 refused then
		pyimport.Keys:     {Found: 4, Imported: 1, Expired: 1, Refused: 2},
		pyimport.Sessions: {Found: 1, Refused: 1},
		pyimport.Leases:   {Found: 1, Refused: 1},
		pyimport.Runs:     {Found: 4, Imported: 2, Refused: 2},
	})
	for _, id := range []string{"wf-1", "wf-4"} {
		if _, err := st.GetRun(ctx, id); err != nil {
			t.Errorf("run %s beside the refused ones: %v", id, err)
		}
	}
	if _, err := st.Get(ctx, "ok"); err != nil {
		t.Errorf("key ok: %v", err)
	}
}
