package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/statesidecar/state"
)

// Importing a run that another system left claimed by a worker that is
// gone: it arrives with its id, status, last step and outputs, and its claim
// has expired, so a replacement takes it over at once and resumes. A second
// import of the same run writes nothing.
func ExampleStore_ImportRun() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	created := time.Date(2025, 6, 10, 9, 0, 0, 0, time.UTC)
	in := state.ImportedRun{ID: "wf-3f9a0c1b2d4e", Name: "pr-review-42", Tags: map[string]string{"pipeline": "pr-review"},
		Status: state.StatusRunning, AgentID: "worker-a", Attempt: 1, LastStep: 2,
		CreatedAt: created, UpdatedAt: created.Add(time.Minute),
		Outputs: []state.StepOutput{{Step: 1, Output: json.RawMessage(`{"files":12}`)}, {Step: 2, Output: json.RawMessage(`{"lint":[]}`)}}}
	run, written, err := st.ImportRun(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.ID, run.Status, run.AgentID, "claimable:", run.Claimable, "written:", written)

	c, err := st.ClaimRun(ctx, in.ID, "worker-c")
	if err != nil {
		log.Fatal(err)
	}
	res, err := st.ResumeRun(ctx, in.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reclaimed:", c.Reclaimed, "attempt:", c.Attempt, "resume after step", res.LastStep, "with", len(res.Outputs), "outputs")

	_, written, err = st.ImportRun(ctx, in)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("imported again, written:", written)
	// Output:
	// wf-3f9a0c1b2d4e running worker-a claimable: true written: true
	// reclaimed: true attempt: 2 resume after step 2 with 2 outputs
	// imported again, written: false
}
