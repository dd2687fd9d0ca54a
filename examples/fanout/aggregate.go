package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// aggregatorConfig is what an aggregator process is told.
type aggregatorConfig struct {
	agentFlags
}

// A report is the aggregator's join of the items' results.
type report struct {
	Job      string       `json:"job"`
	Parent   string       `json:"parent_run_id"`
	By       string       `json:"by"`
	Items    []itemResult `json:"items"`
	Total    int64        `json:"total"`
	Expected int64        `json:"expected"`
}

// An aggregator joins the job's results. The join parent cannot be
// claimed while any child is open; the aggregator tries, and when refused
// long-polls workflow_wait until the parent leaves "waiting" (the commit
// that finishes the last child releases it). Of several aggregators
// exactly one claim wins; the others stand by until the join is done (or
// the winner's claim expires: then one of them takes the join over).
type aggregator struct {
	cfg aggregatorConfig
	c   *sidecarClient
	out *emitter
}

// released are the statuses of a join parent that no longer waits.
var released = []string{"created", "claimed", "running", "done", "failed"}

func (a *aggregator) run(ctx context.Context) error {
	for {
		var cl claimResult
		if err := a.c.call(ctx, "workflow_claim", map[string]any{"run_id": a.cfg.Parent, "agent_id": a.cfg.ID, "claim_ttl_seconds": 60}, &cl); err != nil {
			return err
		}
		if cl.Claimed {
			return a.join(ctx, *cl.Fence)
		}
		var st runInfo
		if err := a.c.call(ctx, "workflow_status", map[string]any{"run_id": a.cfg.Parent}, &st); err != nil {
			return err
		}
		switch st.Status {
		case "done", "failed":
			a.out.emit(event{Ev: "finished", Run: a.cfg.Parent, Msg: "the parent is already " + st.Status + ": nothing to join"})
			return nil
		case "created":
			continue // released between the claim and the status: claim again
		case "claimed", "running":
			// Stand by: should the winner die, its claim expires and this
			// aggregator takes the join over.
			timeout := 60.0
			if st.ClaimExpiresAt != nil {
				timeout = min(max(*st.ClaimExpiresAt-float64(time.Now().UnixMilli())/1000+0.1, 0.1), 60)
			}
			a.out.emit(event{Ev: "lost", Run: a.cfg.Parent, Msg: fmt.Sprintf("lost the claim (%s): standing by until the join is done or its claim expires", deref(cl.Reason))})
			if err := a.c.call(ctx, "workflow_wait", map[string]any{"run_id": a.cfg.Parent, "timeout_seconds": timeout}, nil); err != nil {
				return err
			}
			continue
		}
		a.out.emit(event{Ev: "refused", Run: a.cfg.Parent, Children: st.Children,
			Msg: fmt.Sprintf("claim refused, children %s: waiting (workflow_wait) for the join to release", countsText(st.Children))})
		var w runInfo
		if err := a.c.call(ctx, "workflow_wait", map[string]any{"run_id": a.cfg.Parent, "until": released, "timeout_seconds": 60}, &w); err != nil {
			return err
		}
		if w.Reached {
			a.out.emit(event{Ev: "released", Run: a.cfg.Parent, Msg: "the join released the parent (status " + w.Status + "): every child finished"})
		}
	}
}

// join reads every child's result, writes the report and finishes the
// parent with it.
func (a *aggregator) join(ctx context.Context, fence int64) error {
	var st runInfo
	if err := a.c.call(ctx, "workflow_status", map[string]any{"run_id": a.cfg.Parent}, &st); err != nil {
		return err
	}
	a.out.emit(event{Ev: "claimed", Run: a.cfg.Parent, Fence: fence, Children: st.Children,
		Msg: fmt.Sprintf("claimed the parent (fence %d), children %s", fence, countsText(st.Children))})
	var kids runsResult
	if err := a.c.call(ctx, "workflow_discover", map[string]any{"parent_run_id": a.cfg.Parent, "limit": 1000}, &kids); err != nil {
		return err
	}
	rep := report{Job: a.cfg.Job, Parent: a.cfg.Parent, By: a.cfg.ID, Items: []itemResult{}, Expected: expectedTotal(len(kids.Runs))}
	for _, k := range kids.Runs {
		n, err := strconv.Atoi(k.Tags["item"])
		if err != nil {
			return fmt.Errorf("child %s has no item tag", k.RunID)
		}
		var got getResult
		if err := a.c.call(ctx, "state_get", map[string]any{"key": resultKey(a.cfg.Job, n)}, &got); err != nil {
			return err
		}
		if !got.Found {
			return fmt.Errorf("item %d (%s, %s) has no result at %s", n, k.RunID, k.Status, resultKey(a.cfg.Job, n))
		}
		var r itemResult
		if err := json.Unmarshal(got.Value, &r); err != nil {
			return fmt.Errorf("the result of item %d: %w", n, err)
		}
		rep.Items = append(rep.Items, r)
		rep.Total += r.Sum
	}
	sort.Slice(rep.Items, func(i, j int) bool { return rep.Items[i].Item < rep.Items[j].Item })
	if err := a.c.call(ctx, "state_set", map[string]any{"key": reportKey(a.cfg.Job), "value": rep, "agent_id": a.cfg.ID}, nil); err != nil {
		return err
	}
	if err := a.c.call(ctx, "workflow_checkpoint", map[string]any{"run_id": a.cfg.Parent, "step": 1, "output": rep,
		"agent_id": a.cfg.ID, "fence": fence, "status": "done"}, nil); err != nil {
		return err
	}
	a.out.emit(event{Ev: "report", Run: a.cfg.Parent, Report: &rep,
		Msg: fmt.Sprintf("joined %d results: total %d (expected %d); parent done", len(rep.Items), rep.Total, rep.Expected)})
	return nil
}

// countsText shows child counts by status, finished ones last.
func countsText(c map[string]int64) string {
	s := ""
	for _, st := range []string{"created", "claimed", "running", "done", "failed"} {
		if c[st] > 0 {
			if s != "" {
				s += ", "
			}
			s += fmt.Sprintf("%d %s", c[st], st)
		}
	}
	if s == "" {
		return "none"
	}
	return s
}
