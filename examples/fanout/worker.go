package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/statesidecar/state/examples/internal/pause"
)

// workerConfig is what a worker process is told on its command line.
type workerConfig struct {
	agentFlags
	ClaimTTL, StepDelay time.Duration
	StallAfter          int64 // stop working (but keep the claim) after checkpointing this step; 0: never
}

// A worker takes children of the job's parent, one at a time, until none
// is open: discover the claimable ones, claim one, resume after its last
// checkpoint, checkpoint each step with its fence, write the item's result
// to the KV store and finish the run. When every open child is held by
// another worker, it waits (workflow_wait) for that child to finish or its
// claim to expire, whichever comes first: a crashed worker's child is
// claimable once its claim TTL has passed.
type worker struct {
	cfg workerConfig
	c   *sidecarClient
	out *emitter
}

// errFenced means the worker's claim was taken over: it stops that child.
var errFenced = errors.New("fenced out")

func (w *worker) run(ctx context.Context) error {
	for {
		var all runsResult
		if err := w.c.call(ctx, "workflow_discover", map[string]any{"parent_run_id": w.cfg.Parent, "limit": 1000}, &all); err != nil {
			return err
		}
		var held *runInfo
		for i, r := range all.Runs {
			if open(r.Status) && (held == nil || r.ClaimExpiresAt != nil && (held.ClaimExpiresAt == nil || *r.ClaimExpiresAt < *held.ClaimExpiresAt)) {
				held = &all.Runs[i]
			}
		}
		if held == nil {
			w.out.emit(event{Ev: "idle", Msg: "every child is finished: exiting"})
			return nil
		}
		took, err := w.takeOne(ctx)
		if err != nil {
			return err
		}
		if !took {
			if err := w.await(ctx, *held); err != nil {
				return err
			}
		}
	}
}

// takeOne claims a claimable child and works on it; false when it found
// none it could claim.
func (w *worker) takeOne(ctx context.Context) (bool, error) {
	var claimable runsResult
	if err := w.c.call(ctx, "workflow_discover", map[string]any{"parent_run_id": w.cfg.Parent, "claimable": true, "limit": 1000}, &claimable); err != nil {
		return false, err
	}
	for _, r := range claimable.Runs {
		var cl claimResult
		if err := w.c.call(ctx, "workflow_claim", map[string]any{"run_id": r.RunID, "agent_id": w.cfg.ID,
			"claim_ttl_seconds": w.cfg.ClaimTTL.Seconds()}, &cl); err != nil {
			return false, err
		}
		item := r.Tags["item"]
		if !cl.Claimed {
			w.out.emit(event{Ev: "lost", Run: r.RunID, Item: item, Msg: fmt.Sprintf("lost item %s to another worker: %s", item, deref(cl.Reason))})
			continue
		}
		err := w.work(ctx, r.RunID, item, *cl.Attempt, *cl.Fence)
		if errors.Is(err, errFenced) {
			w.out.emit(event{Ev: "fenced", Run: r.RunID, Item: item, Fence: *cl.Fence, Msg: fmt.Sprintf("item %s was taken over: stopped without writing (%v)", item, err)})
			return true, nil
		}
		return true, err
	}
	return false, nil
}

// await waits until r, an open child held by another worker, finishes or
// its claim expires.
func (w *worker) await(ctx context.Context, r runInfo) error {
	timeout := w.cfg.ClaimTTL.Seconds() // not claimed yet when discovered: look again soon
	if r.ClaimExpiresAt != nil {
		timeout = min(max(*r.ClaimExpiresAt-float64(time.Now().UnixMilli())/1000+0.1, 0.1), 60)
	}
	w.out.emit(event{Ev: "waiting", Run: r.RunID, Item: r.Tags["item"], Msg: fmt.Sprintf("nothing claimable: waiting for item %s (held by %s) to finish or its claim to expire (%.1fs)",
		r.Tags["item"], deref(r.AgentID), timeout)})
	return w.c.call(ctx, "workflow_wait", map[string]any{"run_id": r.RunID, "timeout_seconds": timeout}, nil)
}

// A stepOutput is what a worker checkpoints after each step.
type stepOutput struct {
	Sum int64  `json:"sum"` // the item's running sum after this step
	By  string `json:"by"`
}

// work does the item of run from the step after its last checkpoint.
func (w *worker) work(ctx context.Context, run, item string, attempt, fence int64) error {
	n, err := strconv.Atoi(item)
	if err != nil {
		return fmt.Errorf("child %s has no item tag: %q", run, item)
	}
	w.out.emit(event{Ev: "claimed", Run: run, Item: item, Attempt: attempt, Fence: fence,
		Msg: fmt.Sprintf("claimed item %s (attempt %d, fence %d)", item, attempt, fence)})
	var res resumeResult
	if err := w.c.call(ctx, "workflow_resume", map[string]any{"run_id": run}, &res); err != nil {
		return err
	}
	var sum int64
	if res.LastStep > 0 {
		var o stepOutput
		if err := json.Unmarshal(res.StepOutputs[strconv.FormatInt(res.LastStep, 10)], &o); err != nil {
			return fmt.Errorf("the checkpoint of step %d of %s: %w", res.LastStep, run, err)
		}
		sum = o.Sum
		w.out.emit(event{Ev: "resumed", Run: run, Item: item, Step: res.LastStep, Attempt: attempt,
			Msg: fmt.Sprintf("resumed item %s after step %d (checkpointed by %s, running sum %d)", item, res.LastStep, o.By, sum)})
	}
	ckpt := func(step int64, output any, done bool) error {
		args := map[string]any{"run_id": run, "step": step, "output": output, "agent_id": w.cfg.ID, "fence": fence}
		if done {
			args["status"] = "done"
		}
		err := w.c.call(ctx, "workflow_checkpoint", args, nil)
		if te := (*toolError)(nil); errors.As(err, &te) {
			return fmt.Errorf("%w: %s", errFenced, te.Msg)
		}
		return err
	}
	for step := res.LastStep + 1; step <= stepCount; step++ {
		if err := pause.Sleep(ctx, w.cfg.StepDelay); err != nil {
			return err
		}
		sum += stepSum(n, int(step))
		if err := ckpt(step, stepOutput{Sum: sum, By: w.cfg.ID}, false); err != nil {
			return err
		}
		w.out.emit(event{Ev: "step", Run: run, Item: item, Step: step, Fence: fence,
			Msg: fmt.Sprintf("item %s step %d/%d checkpointed (running sum %d)", item, step, stepCount, sum)})
		if step == w.cfg.StallAfter {
			w.out.emit(event{Ev: "stalled", Run: run, Item: item, Step: step, Fence: fence,
				Msg: fmt.Sprintf("stalling in the middle of item %s, claim held, no more heartbeats", item)})
			<-ctx.Done() // until the orchestrator kills this process
			return ctx.Err()
		}
	}
	res2 := itemResult{Item: n, Run: run, Sum: sum, By: w.cfg.ID, Attempt: attempt, Fence: fence}
	if err := w.c.call(ctx, "state_set", map[string]any{"key": resultKey(w.cfg.Job, n), "value": res2, "agent_id": w.cfg.ID}, nil); err != nil {
		return err
	}
	if err := ckpt(stepCount+1, res2, true); err != nil {
		return err
	}
	w.out.emit(event{Ev: "done", Run: run, Item: item, Attempt: attempt, Fence: fence,
		Msg: fmt.Sprintf("item %s done: sum %d, result in %s", item, sum, resultKey(w.cfg.Job, n))})
	return nil
}

// An itemResult is what a worker writes to the KV store for its item.
type itemResult struct {
	Item    int    `json:"item"`
	Run     string `json:"run_id"`
	Sum     int64  `json:"sum"`
	By      string `json:"by"`
	Attempt int64  `json:"attempt"`
	Fence   int64  `json:"fence"`
}
