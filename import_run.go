package state

import (
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// An ImportedRun is a workflow run to import, with its step outputs.
type ImportedRun struct {
	// ID is the run's id; it need not have the "wf-" form of the ids the
	// store draws.
	ID   string
	Name string
	Tags map[string]string
	// Status is the run's status.
	Status Status
	// AgentID is the agent that claimed the run last, or "". A created run
	// has none, a claimed run must have one.
	AgentID string
	// LastStep is the highest step checkpointed.
	LastStep int64
	// Attempt counts the claims the run had: at least 1 for a run with an
	// agent. The run's fence is its attempt, as for a run claimed Attempt
	// times through the store.
	Attempt int64
	// CreatedAt orders the run in listings (newest first); zero means the
	// time of the import. UpdatedAt is when it last changed; zero means
	// CreatedAt.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Outputs are the outputs of the checkpointed steps; steps must be
	// distinct.
	Outputs []StepOutput
}

// ImportRun writes run r with its outputs, unless a run with its id exists,
// and reports whether it wrote it; an existing run (and its outputs) is
// returned as it is. It writes what the store's own transitions would have
// written for the run: the run record, every index entry of its status and
// tags, the status counters, its outputs and a "workflow.import" history
// event.
//
// An imported run never holds a live claim: a claimed or running run with an
// agent gets a claim that expired at the import, so that any agent may claim
// it at once (ClaimRun reports Reclaimed, with attempt and fence + 1, and
// the last step and outputs kept), which is crash recovery for a run whose
// worker is gone. Its former agent may claim it again the same way.
//
// The run is checked as CreateRun and CheckpointRun check their arguments; an
// invalid one is a *FieldError naming the field and nothing is written. The
// run record is written in one atomic commit together with the outputs that
// fit in it; the outputs of a run with very many or very large ones are
// written before it, in commits of their own made only while no run with
// its id exists.
func (s *Store) ImportRun(ctx context.Context, r ImportedRun) (Run, bool, error) {
	run, ok, err := s.importRun(ctx, r)
	return run, ok, wrap("workflow.import", r.ID, err)
}

func (s *Store) importRun(ctx context.Context, r ImportedRun) (Run, bool, error) {
	lim := s.c.opts.Limits
	if err := s.checkRunID(r.ID); err != nil {
		return Run{}, false, err
	}
	if err := checkKey("name", r.Name, lim.MaxIDBytes); err != nil {
		return Run{}, false, err
	}
	if err := s.checkTags(r.Tags); err != nil {
		return Run{}, false, err
	}
	if err := checkOptionalID("agent_id", r.AgentID, lim.MaxIDBytes); err != nil {
		return Run{}, false, err
	}
	switch {
	case !r.Status.Valid() || r.Status == StatusWaiting:
		return Run{}, false, invalid("status", "must be one of created, claimed, running, done, failed, got %q", r.Status)
	case r.Status == StatusCreated && r.AgentID != "":
		return Run{}, false, invalid("agent_id", "must be empty for a created run (a created run has no claim), got %q", r.AgentID)
	case r.Status == StatusClaimed && r.AgentID == "":
		return Run{}, false, invalid("agent_id", "must be set for a claimed run")
	case r.LastStep < 0 || r.LastStep > maxStep:
		return Run{}, false, invalid("last_step", "must be between 0 and 2^53, got %d", r.LastStep)
	case r.Attempt < 0 || r.Attempt > maxStep:
		return Run{}, false, invalid("attempt", "must be between 0 and 2^53, got %d", r.Attempt)
	case r.AgentID != "" && r.Attempt == 0:
		return Run{}, false, invalid("attempt", "must be at least 1 for a run with an agent (its agent claimed it)")
	}
	steps := make(map[int64]bool, len(r.Outputs))
	outs := make([][]byte, len(r.Outputs))
	for i, o := range r.Outputs {
		field := "outputs[" + itoa(i) + "]"
		if o.Step < 0 || o.Step > maxStep {
			return Run{}, false, invalid(field+".step", "must be between 0 and 2^53, got %d", o.Step)
		}
		if steps[o.Step] {
			return Run{}, false, invalid(field+".step", "repeats step %d", o.Step)
		}
		steps[o.Step] = true
		if o.Output == nil {
			return Run{}, false, invalid(field+".output", "must be set (JSON null is the four bytes null)")
		}
		b, err := encodeJSON(field+".output", o.Output, lim.MaxValueBytes)
		if err != nil {
			return Run{}, false, err
		}
		outs[i] = b
	}
	done, err := s.enter()
	if err != nil {
		return Run{}, false, err
	}
	defer done()

	stamp, _ := s.now()
	nowMs := layout.Ms(stamp)
	v := &layout.RunValue{Status: string(r.Status), AgentID: r.AgentID, LastStep: r.LastStep,
		Attempt: r.Attempt, Fence: r.Attempt, Name: r.Name, Tags: maps.Clone(r.Tags),
		CreatedAt: layout.Ms(orStamp(r.CreatedAt, stamp))}
	v.UpdatedAt = layout.Ms(orStamp(r.UpdatedAt, layout.Time(v.CreatedAt)))
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	if layout.Open(v.Status) && v.AgentID != "" {
		v.ClaimExpiresAt = nowMs // expired from the start: claimable at once
	}

	absent := []backend.Cond{{Key: layout.Run(r.ID), Revision: 0}}
	var ops []backend.Op
	size := 0
	for i, o := range r.Outputs {
		op := backend.Op{Kind: backend.OpPut, Key: layout.Output(r.ID, o.Step), Value: outs[i], Time: stamp}
		if len(ops) > 0 && (len(ops) == importBatchOps || size+len(op.Value) > importBatchBytes) {
			res, err := s.commit(ctx, &backend.Txn{If: absent, Then: ops})
			if err != nil {
				return Run{}, false, err
			}
			if !res.Committed {
				return s.existingRun(ctx, r.ID)
			}
			ops, size = nil, 0
		}
		ops = append(ops, op)
		size += len(op.Value)
	}
	val, _ := json.Marshal(v)
	txn := &backend.Txn{
		If: absent,
		Then: append([]backend.Op{{Kind: backend.OpPut, Key: layout.Run(r.ID), Value: val, Time: stamp}},
			countOps(v, "", v.Status, stamp)...),
		Events: []backend.Event{{Key: r.ID, Op: "workflow.import", Value: layout.EventOf(v, nil), Writer: r.AgentID}},
	}
	for _, k := range layout.IndexKeys(r.ID, v) {
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: k, Time: stamp})
	}
	txn.Then = append(txn.Then, ops...)
	res, err := s.commit(ctx, txn)
	if err != nil {
		return Run{}, false, err
	}
	if !res.Committed {
		return s.existingRun(ctx, r.ID)
	}
	return runOf(r.ID, v, nowMs), true, nil
}

// existingRun returns the run an import found in its place.
func (s *Store) existingRun(ctx context.Context, id string) (Run, bool, error) {
	runs, err := s.loadRuns(ctx, []string{id})
	if err != nil {
		return Run{}, false, err
	}
	if runs[0] == nil { // it was there a moment ago: removed by a reset since
		return Run{}, false, ErrNotFound
	}
	return *runs[0], false, nil
}
