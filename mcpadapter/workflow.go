package mcpadapter

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	"github.com/statesidecar/state"
)

// runJSON is a run as the tools show it (the Python sidecar's WorkflowMeta
// and the new claim fields).
type runJSON struct {
	RunID          string            `json:"run_id"`
	Name           string            `json:"name"`
	Status         string            `json:"status" desc:"waiting (a join parent whose children are not all finished), created, claimed, running, done or failed"`
	Tags           map[string]string `json:"tags"`
	AgentID        *string           `json:"agent_id" desc:"the agent that claimed the run last"`
	LastStep       int64             `json:"last_step"`
	CreatedAt      stamp             `json:"created_at"`
	UpdatedAt      stamp             `json:"updated_at"`
	Attempt        int64             `json:"attempt" desc:"number of claims so far; above 1 a previous worker's claim expired"`
	Fence          *int64            `json:"fence" desc:"the current claim's fencing token"`
	ClaimExpiresAt *stamp            `json:"claim_expires_at"`
}

func runOf(r state.Run) runJSON {
	return runJSON{RunID: r.ID, Name: r.Name, Status: string(r.Status), Tags: r.Tags, AgentID: optStr(r.AgentID),
		LastStep: r.LastStep, CreatedAt: stamp(r.CreatedAt), UpdatedAt: stamp(r.UpdatedAt), Attempt: r.Attempt,
		Fence: optInt(r.Fence), ClaimExpiresAt: optStamp(r.ClaimExpiresAt)}
}

func runsOf(p state.RunPage) runsResult {
	out := runsResult{Runs: make([]runJSON, len(p.Runs)), NextCursor: optStr(p.NextCursor)}
	for i, r := range p.Runs {
		out.Runs[i] = runOf(r)
	}
	return out
}

// The results of the workflow tools, fields in the Python sidecar's order
// followed by the new ones.
type (
	createResult struct {
		RunID    string `json:"run_id"`
		Name     string `json:"name"`
		Status   string `json:"status"`
		Replayed bool   `json:"replayed" desc:"true when idempotency_key had already created this run: nothing new was created"`
	}
	runsResult struct {
		Runs       []runJSON `json:"runs"`
		NextCursor *string   `json:"next_cursor" desc:"pass as cursor for the next page; null on the last page"`
	}
	claimResult struct {
		Claimed   bool    `json:"claimed"`
		RunID     string  `json:"run_id"`
		AgentID   *string `json:"agent_id"`
		Reason    *string `json:"reason" desc:"why the claim failed"`
		Fence     *int64  `json:"fence" desc:"pass to workflow_checkpoint"`
		Attempt   *int64  `json:"attempt" desc:"above 1 a previous worker's claim expired: call workflow_resume"`
		ExpiresAt *stamp  `json:"expires_at" desc:"when the claim expires without a heartbeat"`
	}
	checkpointResult struct {
		OK    bool   `json:"ok"`
		RunID string `json:"run_id"`
		Step  int64  `json:"step"`
	}
	resumeResult struct {
		RunID       string      `json:"run_id"`
		LastStep    int64       `json:"last_step"`
		StepOutputs stepOutputs `json:"step_outputs"`
		Meta        runJSON     `json:"meta"`
	}
	statusResult struct {
		RunID          string  `json:"run_id"`
		Status         string  `json:"status"`
		LastStep       int64   `json:"last_step"`
		AgentID        *string `json:"agent_id"`
		CreatedAt      stamp   `json:"created_at"`
		UpdatedAt      stamp   `json:"updated_at"`
		Attempt        int64   `json:"attempt"`
		Fence          *int64  `json:"fence"`
		ClaimExpiresAt *stamp  `json:"claim_expires_at"`
		ParentRunID    *string `json:"parent_run_id" desc:"the run's parent; null for a run without one"`
		Join           bool    `json:"join" desc:"the run is a join parent: it waits for its children"`
		Children       *counts `json:"children" desc:"the number of the run's children in each status; null for a run without children"`
	}
)

// counts are numbers by status.
type counts map[string]int64

// countsOf turns a run's child counts into counts; nil for none.
func countsOf(m map[state.Status]int64) *counts {
	if m == nil {
		return nil
	}
	c := counts{}
	for st, n := range m {
		c[string(st)] = n
	}
	return &c
}

// stepOutputs encodes as an object from step numbers, as strings, to
// outputs, in ascending step order.
type stepOutputs []state.StepOutput

// MarshalJSON writes the outputs in step order.
func (s stepOutputs) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, o := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.FormatInt(o.Step, 10) + `":`)
		b.Write(o.Output)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (stepOutputs) jsonSchema() obj {
	return obj{{"type", "object"}, {"additionalProperties", anyJSON()},
		{"description", "the output of every checkpointed step, keyed by step number, ascending"}}
}

func workflowCreate(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	var opts []state.CreateOption
	if a.has("parent_run_id") {
		opts = append(opts, state.WithParent(a.str("parent_run_id")))
	}
	if a.bool("join") {
		opts = append(opts, state.WithJoin())
	}
	if a.has("idempotency_key") {
		opts = append(opts, state.WithIdempotencyKey(a.str("idempotency_key")))
	}
	r, err := st.CreateRun(ctx, a.str("name"), a.tags("tags"), opts...)
	if err != nil {
		return nil, err
	}
	return createResult{RunID: r.ID, Name: r.Name, Status: string(r.Status), Replayed: r.Replayed}, nil
}

func workflowDiscover(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	p, err := st.DiscoverRuns(ctx, state.RunQuery{Tags: a.tags("tags"), Status: state.Status(a.str("status")),
		Claimable: a.bool("claimable"), ParentID: a.str("parent_run_id"), Limit: int(a.int("limit")), Cursor: a.str("cursor")})
	if err != nil {
		return nil, err
	}
	return runsOf(p), nil
}

func workflowList(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	p, err := st.ListRuns(ctx, pageOptions(a)...)
	if err != nil {
		return nil, err
	}
	return runsOf(p), nil
}

func workflowClaim(ctx context.Context, st *state.Store, a args, o *Options) (any, error) {
	id, agent := a.str("run_id"), a.str("agent_id")
	var opts []state.ClaimOption
	switch {
	case a.has("claim_ttl_seconds"):
		opts = append(opts, state.WithClaimTTL(a.dur("claim_ttl_seconds")))
	case o.ClaimTTL > 0:
		opts = append(opts, state.WithClaimTTL(o.ClaimTTL))
	}
	c, err := st.ClaimRun(ctx, id, agent, opts...)
	var ce *state.ClaimError
	switch {
	case errors.As(err, &ce):
		return claimResult{RunID: id, Reason: optStr(ce.Error())}, nil
	case errors.Is(err, state.ErrNotFound):
		return claimResult{RunID: id, Reason: optStr(runNotFound(id))}, nil
	case err != nil:
		return nil, err
	}
	return claimResult{Claimed: true, RunID: id, AgentID: &agent, Fence: &c.Fence, Attempt: &c.Attempt,
		ExpiresAt: optStamp(c.ExpiresAt)}, nil
}

func workflowCheckpoint(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	id, step := a.str("run_id"), a.int("step")
	var opts []state.CheckpointOption
	if a.has("agent_id") {
		opts = append(opts, state.WithAgent(a.str("agent_id")))
	}
	if a.has("fence") {
		opts = append(opts, state.WithFence(a.int("fence")))
	}
	if a.has("status") {
		opts = append(opts, state.WithStatus(state.Status(a.str("status"))))
	}
	if _, err := st.CheckpointRun(ctx, id, step, a.raw("output"), opts...); err != nil {
		return nil, err
	}
	return checkpointResult{OK: true, RunID: id, Step: step}, nil
}

func workflowResume(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	r, err := st.ResumeRun(ctx, a.str("run_id"))
	if err != nil {
		return nil, err
	}
	return resumeResult{RunID: r.Run.ID, LastStep: r.LastStep, StepOutputs: r.Outputs, Meta: runOf(r.Run)}, nil
}

func workflowStatus(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	r, err := st.GetRun(ctx, a.str("run_id"))
	if err != nil {
		return nil, err
	}
	return statusResult{RunID: r.ID, Status: string(r.Status), LastStep: r.LastStep, AgentID: optStr(r.AgentID),
		CreatedAt: stamp(r.CreatedAt), UpdatedAt: stamp(r.UpdatedAt), Attempt: r.Attempt, Fence: optInt(r.Fence),
		ClaimExpiresAt: optStamp(r.ClaimExpiresAt), ParentRunID: optStr(r.ParentID), Join: r.Join, Children: countsOf(r.Children)}, nil
}
