package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"
)

// A report is the aggregator's combined review, stored at report.
type report struct {
	PR          review.PR       `json:"pr"`
	RunID       string          `json:"run_id"`
	By          string          `json:"by"`
	GeneratedAt float64         `json:"generated_at"`
	Verdict     string          `json:"verdict"`
	Counts      map[string]int  `json:"counts"`
	Reviews     []reportSection `json:"reviews"`
}

// A reportSection is one reviewer's part of the report.
type reportSection struct {
	Kind     string           `json:"kind"`
	Status   string           `json:"status"`
	Agent    string           `json:"agent"`
	Lang     string           `json:"lang"`
	Attempt  int64            `json:"attempt"`
	Summary  string           `json:"summary"`
	About    string           `json:"about"`
	Findings []review.Finding `json:"findings"`
}

// aggregate is the aggregator's life: find the review run, wait until the
// sidecar releases it (its reviewer runs all finished: the fan-in,
// fanin.go), claim it, join the three findings into one report and finish
// the review run.
func (a *agent) aggregate(ctx context.Context) int {
	a.out.event("started", "aggregator started", nil)
	review, err := openReview(ctx, a, a.cfg.Demo)
	if err != nil {
		return a.fail("discovering the review run", err)
	}
	if review == nil {
		a.out.event("idle", "nothing to do: no review run is open", nil)
		return exitOK
	}
	wctx, cancel := context.WithTimeout(ctx, a.cfg.Standby)
	children, err := awaitReviews(wctx, a, review.RunID, func(open []string) {
		a.out.event("waiting", fmt.Sprintf("waiting for %d reviews: %v", len(open), open), map[string]any{"open": open})
	})
	cancel()
	if err != nil {
		return a.fail("waiting for the reviews", err)
	}
	// Released: now claimable, unless another aggregator holds it (then
	// stand by until that claim expires, as a reviewer would).
	runID, code := a.findAndClaim(ctx, aggregatorTags(a.cfg.Demo), "review", "discovering the review run")
	if runID == "" {
		return code
	}
	rep, err := a.join(ctx, runID, children)
	if err != nil {
		return a.stopped(err)
	}
	out := map[string]any{"verdict": rep.Verdict, "counts": rep.Counts, "by": a.cfg.ID}
	if err := a.checkpoint(ctx, 1, out, true); err != nil {
		return a.stopped(err)
	}
	a.out.event("report", fmt.Sprintf("combined report for %s: %s", rep.PR.Ref(), rep.Verdict),
		map[string]any{"run_id": runID, "verdict": rep.Verdict, "counts": rep.Counts})
	return exitOK
}

// join reads each reviewer's findings and writes the combined report.
func (a *agent) join(ctx context.Context, parent string, children map[string]runInfo) (report, error) {
	rep := report{RunID: parent, By: a.cfg.ID, GeneratedAt: epoch(time.Now()), Counts: map[string]int{}}
	var got getResult
	if err := a.callInto(ctx, "state_get", map[string]any{"key": prKey(parent)}, &got); err != nil {
		return rep, err
	}
	if got.Found {
		_ = json.Unmarshal(got.Value, &rep.PR)
		rep.PR.Diff = ""
	}
	for _, kind := range review.Kinds {
		sec := reportSection{Kind: kind, Status: children[kind].Status, Findings: []review.Finding{}}
		var f getResult
		if err := a.callInto(ctx, "state_get", map[string]any{"key": findingsKey(parent, kind)}, &f); err != nil {
			return rep, err
		}
		var res reviewResult
		if f.Found && json.Unmarshal(f.Value, &res) == nil {
			sec.Agent, sec.Lang, sec.Attempt, sec.Summary, sec.About = res.Agent, res.Lang, res.Attempt, res.Summary, res.About
			sec.Findings = res.Findings
		} else {
			sec.Summary = "no findings were published (the review " + sec.Status + ")"
		}
		for _, x := range sec.Findings {
			rep.Counts[x.Severity]++
		}
		rep.Reviews = append(rep.Reviews, sec)
	}
	switch {
	case rep.Counts["high"] > 0:
		rep.Verdict = "changes requested"
	case rep.Counts["medium"] > 0:
		rep.Verdict = "needs attention"
	default:
		rep.Verdict = "looks good"
	}
	err := a.callInto(ctx, "state_set", map[string]any{"key": reportKey(parent), "value": rep, "agent_id": a.cfg.ID,
		"ttl_seconds": dataTTLSeconds}, nil)
	return rep, err
}
