package state

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A StepOutput is the stored output of one checkpointed step.
type StepOutput struct {
	Step   int64
	Output json.RawMessage
}

// A Resume is everything a worker needs to continue a run.
type Resume struct {
	Run      Run
	LastStep int64
	// Outputs holds every checkpointed step's output, by ascending step.
	Outputs []StepOutput
}

// CheckpointRun stores output as the output of step (replaying a step
// overwrites it), raises the run's last step to step if it is higher, moves
// a created or claimed run to running and extends the live claim, if any, by
// its claim TTL: every checkpoint is a heartbeat.
//
// It honours WithAgent and WithFence, which reject the write with a
// *NotHeldError unless the caller still holds the live claim (a stale worker
// whose claim expired and was taken over cannot overwrite its successor), and
// WithStatus(StatusDone or StatusFailed), which finishes the run in the same
// atomic write. A finished run accepts no more checkpoints (a *ClaimError
// matching ErrFinished), except an exact replay of the one that finished it;
// with WithAgent or WithFence, a replay succeeds only when they match the
// claim that was last on the run, and is a *NotHeldError otherwise, so a
// worker that lost its claim is never told that its write succeeded. Only
// WithFence tells the holder apart from an agent that restarted and reuses
// the holder's id. An unknown run is an error matching ErrNotFound.
func (s *Store) CheckpointRun(ctx context.Context, id string, step int64, output any, opts ...CheckpointOption) (Run, error) {
	r, err := s.checkpoint(ctx, id, step, output, collect(opts))
	return r, wrap("workflow.checkpoint", id, err)
}

func (s *Store) checkpoint(ctx context.Context, id string, step int64, output any, o callOptions) (Run, error) {
	if err := s.checkRunID(id); err != nil {
		return Run{}, err
	}
	if step < 0 || step > maxStep {
		return Run{}, invalid("step", "must be between 0 and 2^53, got %d", step)
	}
	if o.status != "" && !o.status.Finished() {
		return Run{}, invalid("status", "must be done or failed to finish the run, got %q", o.status)
	}
	if err := checkOptionalID("agent_id", o.agent, s.c.opts.Limits.MaxIDBytes); err != nil {
		return Run{}, err
	}
	out, err := encodeJSON("output", output, s.c.opts.Limits.MaxValueBytes)
	if err != nil {
		return Run{}, err
	}
	var res Run
	err = s.updateRunAs(ctx, id, []string{layout.Output(id, step)}, o.status != "", func(v *layout.RunValue, extra []backend.Record, now time.Time) (*backend.Txn, error) {
		or := extra[0]
		st := Status(v.Status)
		nowMs := layout.Ms(now)
		if st.Finished() {
			if err := checkLastHolder(o, v); err != nil {
				return nil, err
			}
			if o.status == st && or.Live() && bytes.Equal(or.Value, out) {
				res = runOf(id, v, nowMs)
				return nil, nil // a replay of the checkpoint that finished the run
			}
			return nil, &ClaimError{Status: st, Holder: v.AgentID}
		}
		if st == StatusWaiting {
			return nil, &ClaimError{Status: st} // claim it once its children finished
		}
		if err := checkHolder(o, v, nowMs); err != nil {
			return nil, err
		}
		nv := *v
		nv.LastStep = max(nv.LastStep, step)
		switch {
		case o.status != "":
			nv.Status = string(o.status)
			nv.ClaimExpiresAt, nv.ClaimTTL = 0, 0
		case st == StatusCreated || st == StatusClaimed:
			nv.Status = layout.Running
		}
		if o.status == "" && v.ClaimLive(nowMs) {
			ttl := v.ClaimTTL
			if ttl <= 0 {
				ttl = ttlMillis(s.c.opts.ClaimTTL)
			}
			nv.ClaimExpiresAt, nv.ClaimTTL = nowMs+ttl, ttl
		}
		nv.UpdatedAt = nowMs
		txn := runWrite(id, v, &nv, now)
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: layout.Output(id, step), Value: out, Writer: o.agent, Time: now})
		st2 := step
		txn.Events = []backend.Event{{Key: id, Op: "workflow.checkpoint", Value: layout.EventOf(&nv, &st2), Prev: layout.EventOf(v, nil), Writer: o.agent}}
		if o.status != "" {
			txn.Events = append(txn.Events, backend.Event{Key: id, Op: "workflow.finish", Value: layout.EventOf(&nv, nil), Writer: o.agent})
		}
		res = runOf(id, &nv, nowMs)
		return txn, nil
	})
	return res, err
}

// checkHolder enforces WithAgent and WithFence on an open run: the caller
// must hold its live claim.
func checkHolder(o callOptions, v *layout.RunValue, nowMs int64) error {
	if o.agent == "" && !o.fenceSet {
		return nil
	}
	if !v.ClaimLive(nowMs) || (o.agent != "" && v.AgentID != o.agent) || (o.fenceSet && o.fence != v.Fence) {
		return notHeld(v, nowMs)
	}
	return nil
}

// checkLastHolder enforces WithAgent and WithFence on a finished run, which
// nobody holds any more: only the last claim (its fence, its agent) may
// replay the write that finished the run and be told it succeeded. A
// worker whose claim was taken over, or was released, gets a
// *NotHeldError.
func checkLastHolder(o callOptions, v *layout.RunValue) error {
	if o.agent == "" && !o.fenceSet {
		return nil
	}
	if v.AgentID == "" || (o.agent != "" && v.AgentID != o.agent) || (o.fenceSet && o.fence != v.Fence) {
		return &NotHeldError{}
	}
	return nil
}

// CompleteRun finishes run id as done. It honours WithAgent and WithFence
// (see CheckpointRun): with either, a caller that does not hold the run's live
// claim gets a *NotHeldError. Completing a done run again succeeds without
// change, for a caller giving WithAgent or WithFence only when they match
// the claim that was last on the run.
//
// Only WithFence protects against an agent that restarted and reuses its
// id: the restarted agent has the same id as the holder but not its fence.
func (s *Store) CompleteRun(ctx context.Context, id string, opts ...FinishOption) (Run, error) {
	r, err := s.finish(ctx, id, StatusDone, collect(opts))
	return r, wrap("workflow.complete", id, err)
}

// FailRun finishes run id as failed. It honours WithAgent and WithFence
// exactly as CompleteRun does. Failing a failed run again succeeds without
// change, on the same terms.
func (s *Store) FailRun(ctx context.Context, id string, opts ...FinishOption) (Run, error) {
	r, err := s.finish(ctx, id, StatusFailed, collect(opts))
	return r, wrap("workflow.fail", id, err)
}

func (s *Store) finish(ctx context.Context, id string, status Status, o callOptions) (Run, error) {
	if err := s.checkRunID(id); err != nil {
		return Run{}, err
	}
	if err := checkOptionalID("agent_id", o.agent, s.c.opts.Limits.MaxIDBytes); err != nil {
		return Run{}, err
	}
	var res Run
	err := s.updateRunAs(ctx, id, nil, true, func(v *layout.RunValue, _ []backend.Record, now time.Time) (*backend.Txn, error) {
		nowMs := layout.Ms(now)
		if st := Status(v.Status); st.Finished() {
			if err := checkLastHolder(o, v); err != nil {
				return nil, err
			}
			if st == status {
				res = runOf(id, v, nowMs)
				return nil, nil
			}
			return nil, &ClaimError{Status: st, Holder: v.AgentID}
		}
		if err := checkHolder(o, v, nowMs); err != nil {
			return nil, err
		}
		nv := *v
		nv.Status = string(status)
		nv.ClaimExpiresAt, nv.ClaimTTL = 0, 0
		nv.UpdatedAt = nowMs
		txn := runWrite(id, v, &nv, now)
		txn.Events = []backend.Event{{Key: id, Op: "workflow.finish", Value: layout.EventOf(&nv, nil), Prev: layout.EventOf(v, nil), Writer: o.agent}}
		res = runOf(id, &nv, nowMs)
		return txn, nil
	})
	return res, err
}

// ResumeRun returns run id with its last step and every step output, by
// ascending step, or an error matching ErrNotFound.
func (s *Store) ResumeRun(ctx context.Context, id string) (Resume, error) {
	r, err := s.resume(ctx, id)
	return r, wrap("workflow.resume", id, err)
}

func (s *Store) resume(ctx context.Context, id string) (Resume, error) {
	if err := s.checkRunID(id); err != nil {
		return Resume{}, err
	}
	done, err := s.enter()
	if err != nil {
		return Resume{}, err
	}
	defer done()
	runs, err := s.loadRuns(ctx, []string{id})
	if err != nil {
		return Resume{}, err
	}
	if runs[0] == nil {
		return Resume{}, ErrNotFound
	}
	res := Resume{Run: *runs[0], LastStep: runs[0].LastStep, Outputs: []StepOutput{}}
	prefix := layout.Outputs(id)
	after := ""
	for {
		_, now := s.now()
		recs, err := s.c.drv.List(ctx, &backend.ListQuery{NS: s.ns, Prefix: prefix, After: after, Limit: 500, Now: now})
		if err != nil {
			return Resume{}, err
		}
		for _, r := range recs {
			step, err := layout.StepOf(id, r.Key)
			if err != nil {
				continue // not an output key of this run
			}
			res.Outputs = append(res.Outputs, StepOutput{Step: step, Output: r.Value})
		}
		if len(recs) < 500 {
			return res, nil
		}
		after = recs[len(recs)-1].Key
	}
}
