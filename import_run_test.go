package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
	"github.com/statesidecar/state/statetest"
)

// records returns every record of namespace ns by key (history aside).
func records(t *testing.T, st *state.Store, ns string) map[string]backend.Record {
	t.Helper()
	out := map[string]backend.Record{}
	after := ""
	for {
		recs, err := st.Driver().List(context.Background(), &backend.ListQuery{NS: ns, After: after, Limit: 1000, Now: time.Now().Add(-24 * 365 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out[r.Key] = r
		}
		if len(recs) < 1000 {
			return out
		}
		after = recs[len(recs)-1].Key
	}
}

// importedFrom describes a run as ImportRun takes it.
func importedFrom(t *testing.T, st *state.Store, id string) state.ImportedRun {
	t.Helper()
	res, err := st.ResumeRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Run
	return state.ImportedRun{ID: r.ID, Name: r.Name, Tags: r.Tags, Status: r.Status, AgentID: r.AgentID,
		LastStep: r.LastStep, Attempt: r.Attempt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Outputs: res.Outputs}
}

// TestImportRunWritesWhatTransitionsWrite brings runs through the store's
// own transitions into every status a run can have, imports each as it
// ended up into another namespace, and compares every record: the run (but
// for its claim, which an import leaves expired), every index entry, the
// status counters and the outputs must be the same bytes.
func TestImportRunWritesWhatTransitionsWrite(t *testing.T) {
	ctx := context.Background()
	st, clk := statetest.NewStore(t)
	native, err := st.Namespace("native")
	if err != nil {
		t.Fatal(err)
	}
	imported, err := st.Namespace("imported")
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{"pipeline": "pr-review", "repo": "org/app"}
	step := func(id string, n int64) {
		clk.Advance(time.Second)
		if _, err := native.CheckpointRun(ctx, id, n, map[string]any{"step": n, "files": []int{1, 2}}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(id, agent string) {
		clk.Advance(time.Second)
		if _, err := native.ClaimRun(ctx, id, agent); err != nil {
			t.Fatal(err)
		}
	}
	scenarios := []struct {
		name string
		then func(id string)
	}{
		{"created", func(string) {}},
		{"claimed", func(id string) { claim(id, "worker-a") }},
		{"running", func(id string) { claim(id, "worker-a"); step(id, 1); step(id, 2) }},
		{"running without a claim", func(id string) { step(id, 0) }},
		{"released", func(id string) {
			claim(id, "worker-a")
			if _, err := native.ReleaseRun(ctx, id, "worker-a"); err != nil {
				t.Fatal(err)
			}
		}},
		{"taken over", func(id string) {
			claim(id, "worker-a")
			step(id, 1)
			clk.Advance(time.Hour)
			claim(id, "worker-b")
			step(id, 2)
		}},
		{"done", func(id string) {
			claim(id, "worker-a")
			step(id, 1)
			if _, err := native.CompleteRun(ctx, id); err != nil {
				t.Fatal(err)
			}
		}},
		{"failed", func(id string) {
			claim(id, "worker-a")
			if _, err := native.FailRun(ctx, id); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, sc := range scenarios {
		clk.Advance(time.Minute)
		r, err := native.CreateRun(ctx, "review "+sc.name, tags)
		if err != nil {
			t.Fatal(err)
		}
		sc.then(r.ID)
		in := importedFrom(t, native, r.ID)
		clk.Advance(time.Minute)
		got, ok, err := imported.ImportRun(ctx, in)
		if err != nil || !ok {
			t.Fatalf("%s: ImportRun = %v, %v", sc.name, ok, err)
		}
		want, _ := native.GetRun(ctx, r.ID)
		if got.Status != want.Status || got.Attempt != want.Attempt || got.Fence != want.Fence || got.AgentID != want.AgentID ||
			!got.CreatedAt.Equal(want.CreatedAt) || !got.UpdatedAt.Equal(want.UpdatedAt) || got.LastStep != want.LastStep {
			t.Errorf("%s: imported run %+v, want it as it was %+v", sc.name, got, want)
		}
		if got.Claimable != !got.Status.Finished() {
			t.Errorf("%s: imported run claimable = %v", sc.name, got.Claimable)
		}
	}

	a, b := records(t, st, "native"), records(t, st, "imported")
	for k := range a {
		if _, ok := b[k]; !ok {
			t.Errorf("the store's transitions wrote %s, the import did not", k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("the import wrote %s, the store's transitions did not", k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	for k, ra := range a {
		rb := b[k]
		if strings.HasPrefix(k, layout.RunPrefix) {
			va, _ := layout.DecodeRun(ra.Value)
			vb, _ := layout.DecodeRun(rb.Value)
			if layout.Open(va.Status) && va.AgentID != "" && vb.ClaimExpiresAt == 0 {
				t.Errorf("%s: an imported run with an agent must carry its (expired) claim's expiry", k)
			}
			va.ClaimExpiresAt, va.ClaimTTL, vb.ClaimExpiresAt, vb.ClaimTTL = 0, 0, 0, 0
			ja, _ := json.Marshal(va)
			jb, _ := json.Marshal(vb)
			if !bytes.Equal(ja, jb) {
				t.Errorf("%s:\nnative   %s\nimported %s", k, ja, jb)
			}
			continue
		}
		if !bytes.Equal(ra.Value, rb.Value) || ra.Writer != rb.Writer || !ra.ExpiresAt.Equal(rb.ExpiresAt) {
			t.Errorf("%s: native %q (writer %q), imported %q (writer %q)", k, ra.Value, ra.Writer, rb.Value, rb.Writer)
		}
	}
	ha, _ := native.Health(ctx)
	hb, _ := imported.Health(ctx)
	if ha.Runs != hb.Runs || !maps.Equal(ha.RunsByStatus, hb.RunsByStatus) {
		t.Errorf("health counts native %v %v, imported %v %v", ha.Runs, ha.RunsByStatus, hb.Runs, hb.RunsByStatus)
	}
	evs, err := imported.History(ctx, state.HistoryQuery{Limit: 100})
	if err != nil || len(evs) != len(scenarios) {
		t.Fatalf("history of the import: %d events, %v; want one per run", len(evs), err)
	}
	for _, e := range evs {
		if e.Op != "workflow.import" {
			t.Errorf("an import recorded %q, want workflow.import", e.Op)
		}
	}
}

// TestImportedClaimedRunIsCrashRecovery: a run imported as claimed or
// running by an agent is claimable at once by any agent, as a takeover
// (attempt and fence + 1), keeping its last step and outputs; a listing of
// claimable runs finds it.
func TestImportedClaimedRunIsCrashRecovery(t *testing.T) {
	ctx := context.Background()
	st, clk := statetest.NewStore(t)
	created := statetest.Epoch.Add(-48 * time.Hour)
	for _, status := range []state.Status{state.StatusClaimed, state.StatusRunning} {
		id := "wf-" + string(status)
		_, ok, err := st.ImportRun(ctx, state.ImportedRun{ID: id, Name: "n", Status: status, AgentID: "gone", Attempt: 1,
			LastStep: 3, CreatedAt: created, UpdatedAt: created.Add(time.Hour),
			Outputs: []state.StepOutput{{Step: 3, Output: json.RawMessage(`{"x": 1}`)}}})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		page, err := st.DiscoverRuns(ctx, state.RunQuery{Claimable: true, Status: status})
		if err != nil || len(page.Runs) != 1 || page.Runs[0].ID != id {
			t.Fatalf("%s: claimable runs %+v, %v", status, page.Runs, err)
		}
		clk.Advance(time.Millisecond)
		c, err := st.ClaimRun(ctx, id, "replacement")
		if err != nil {
			t.Fatalf("%s: claiming an imported run: %v", status, err)
		}
		if !c.Reclaimed || c.Attempt != 2 || c.Fence != 2 || c.Run.Status != status || c.Run.LastStep != 3 {
			t.Errorf("%s: claim of an imported run %+v; want a takeover, attempt 2, fence 2, status and last step kept", status, c)
		}
		res, err := st.ResumeRun(ctx, id)
		if err != nil || len(res.Outputs) != 1 || string(res.Outputs[0].Output) != `{"x":1}` {
			t.Errorf("%s: resume %+v, %v", status, res, err)
		}
	}
}

// TestImportRunTwiceKeepsWhatIsThere: importing a run that exists writes
// nothing, whatever changed since, and counts nothing twice.
func TestImportRunTwiceKeepsWhatIsThere(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	in := state.ImportedRun{ID: "wf-000000000001", Name: "n", Status: state.StatusCreated, Tags: map[string]string{"a": "b"},
		Outputs: []state.StepOutput{{Step: 1, Output: json.RawMessage(`1`)}}}
	if _, ok, err := st.ImportRun(ctx, in); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if _, err := st.CheckpointRun(ctx, in.ID, 1, "changed since"); err != nil {
		t.Fatal(err)
	}
	in.Outputs[0].Output = json.RawMessage(`2`)
	r, ok, err := st.ImportRun(ctx, in)
	if err != nil || ok || r.Status != state.StatusRunning {
		t.Fatalf("second import = %+v, %v, %v; want the existing run (running), not written", r, ok, err)
	}
	res, _ := st.ResumeRun(ctx, in.ID)
	if string(res.Outputs[0].Output) != `"changed since"` {
		t.Errorf("a second import overwrote an output: %s", res.Outputs[0].Output)
	}
	h, _ := st.Health(ctx)
	if h.Runs != 1 || h.RunsByStatus[state.StatusRunning] != 1 {
		t.Errorf("counts after two imports %d %v", h.Runs, h.RunsByStatus)
	}
	page, _ := st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"a": "b"}})
	if len(page.Runs) != 1 {
		t.Errorf("discovery lists %d runs after two imports", len(page.Runs))
	}
}

// TestImportRunManyOutputs: outputs beyond one commit's worth all arrive,
// and a run that exists stops an import before it writes any output.
func TestImportRunManyOutputs(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	in := state.ImportedRun{ID: "wf-big", Name: "n", Status: state.StatusRunning, LastStep: 1199}
	for i := range 1200 {
		in.Outputs = append(in.Outputs, state.StepOutput{Step: int64(1199 - i), Output: json.RawMessage(fmt.Sprint(i))})
	}
	if _, ok, err := st.ImportRun(ctx, in); err != nil || !ok {
		t.Fatal(ok, err)
	}
	res, err := st.ResumeRun(ctx, in.ID)
	if err != nil || len(res.Outputs) != 1200 {
		t.Fatalf("resume: %d outputs, %v", len(res.Outputs), err)
	}
	for i, o := range res.Outputs {
		if o.Step != int64(i) || string(o.Output) != fmt.Sprint(1199-i) {
			t.Fatalf("output %d: %+v", i, o)
		}
	}

	other, _ := st.Namespace("other")
	if _, err := other.CreateRun(ctx, "x", nil); err != nil {
		t.Fatal(err)
	}
	page, _ := other.ListRuns(ctx)
	in.ID = page.Runs[0].ID
	if _, ok, err := other.ImportRun(ctx, in); err != nil || ok {
		t.Fatalf("import over an existing run: %v, %v", ok, err)
	}
	res, _ = other.ResumeRun(ctx, in.ID)
	if len(res.Outputs) != 0 {
		t.Errorf("an import over an existing run wrote %d outputs", len(res.Outputs))
	}
}

// TestImportRunRefusesBadRuns: a run the store's own calls could not have
// made is a *FieldError naming the field, and nothing is written.
func TestImportRunRefusesBadRuns(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	ok := state.ImportedRun{ID: "wf-1", Name: "n", Status: state.StatusRunning, AgentID: "a", Attempt: 1}
	cases := map[string]func(r *state.ImportedRun){
		"run_id":    func(r *state.ImportedRun) { r.ID = "" },
		"name":      func(r *state.ImportedRun) { r.Name = "" },
		"status":    func(r *state.ImportedRun) { r.Status = "paused" },
		"agent_id":  func(r *state.ImportedRun) { r.Status = state.StatusCreated },
		"attempt":   func(r *state.ImportedRun) { r.Attempt = 0 },
		"last_step": func(r *state.ImportedRun) { r.LastStep = -1 },
		"tags":      func(r *state.ImportedRun) { r.Tags = map[string]string{"": "x"} },
		"outputs[1].step": func(r *state.ImportedRun) {
			r.Outputs = []state.StepOutput{{Step: 1, Output: []byte("1")}, {Step: -2, Output: []byte("1")}}
		},
		"outputs[0].output": func(r *state.ImportedRun) { r.Outputs = []state.StepOutput{{Step: 1, Output: []byte("{")}} },
		"outputs[1].step ": func(r *state.ImportedRun) {
			r.Outputs = []state.StepOutput{{Step: 1, Output: []byte("1")}, {Step: 1, Output: []byte("2")}}
		},
		"outputs[0].output ": func(r *state.ImportedRun) { r.Outputs = []state.StepOutput{{Step: 1}} },
	}
	for field, change := range cases {
		r := ok
		change(&r)
		_, _, err := st.ImportRun(ctx, r)
		var fe *state.FieldError
		if !errors.As(err, &fe) || fe.Field != strings.TrimSpace(field) {
			t.Errorf("%s: ImportRun = %v, want a *FieldError naming %s", field, err, strings.TrimSpace(field))
		}
	}
	r := ok
	r.Status = state.StatusClaimed
	r.AgentID = ""
	if _, _, err := st.ImportRun(ctx, r); !errors.Is(err, state.ErrInvalid) {
		t.Errorf("a claimed run without an agent: %v", err)
	}
	if n := len(records(t, st, state.DefaultNamespace)); n != 0 {
		t.Errorf("refused imports wrote %d records", n)
	}
}
