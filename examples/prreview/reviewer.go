package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"

	"github.com/statesidecar/state/examples/internal/pause"
)

// A stepOutput is what a reviewer checkpoints for one step; a successor
// rebuilds its findings from the outputs of the steps before its own.
type stepOutput struct {
	Step     string           `json:"step"` // "load", "file" or "publish"
	PR       string           `json:"pr,omitempty"`
	Files    []string         `json:"files,omitempty"`
	File     string           `json:"file,omitempty"`
	Findings []review.Finding `json:"findings,omitempty"`
	By       string           `json:"by"`
	Total    int              `json:"total_findings,omitempty"`
}

// review is a reviewer's whole life: find its run, claim it, resume after
// the last checkpoint, review one file per step, publish and finish.
func (a *agent) review(ctx context.Context) int {
	a.out.event("started", fmt.Sprintf("%s reviewer started (claim TTL %s, %s per step)", kindTitle(a.cfg.Kind), a.cfg.ClaimTTL, a.cfg.StepDelay), nil)
	runID, code := a.findAndClaim(ctx, reviewerTags(a.cfg.Demo, a.cfg.Kind), a.cfg.Kind+" review", "discovering work")
	if runID == "" {
		return code
	}
	if err := a.reviewRun(ctx, runID); err != nil {
		return a.stopped(err)
	}
	return exitOK
}

func (a *agent) reviewRun(ctx context.Context, runID string) error {
	var res resumeResult
	if err := a.callInto(ctx, "workflow_resume", map[string]any{"run_id": runID}, &res); err != nil {
		return err
	}
	parent := res.Meta.Tags[tagParent]
	var got getResult
	if err := a.callInto(ctx, "state_get", map[string]any{"key": prKey(parent)}, &got); err != nil {
		return err
	}
	if !got.Found {
		return fmt.Errorf("the pull request is not in the store (%s)", prKey(parent))
	}
	var pr review.PR
	if err := json.Unmarshal(got.Value, &pr); err != nil {
		return fmt.Errorf("the pull request in %s: %w", prKey(parent), err)
	}
	files, err := pr.Files()
	if err != nil {
		return err
	}
	total := int64(len(files) + 2) // load, one per file, publish
	if res.LastStep > 0 {
		a.out.event("resumed", fmt.Sprintf("resuming %s after step %d of %d: a previous attempt did steps 1-%d",
			runID, res.LastStep, total, res.LastStep), map[string]any{"run_id": runID, "last_step": res.LastStep, "total": total})
	}
	var findings []review.Finding
	for s := int64(1); s <= res.LastStep && s < total; s++ {
		var o stepOutput
		if raw, ok := res.StepOutputs[strconv.FormatInt(s, 10)]; ok && json.Unmarshal(raw, &o) == nil {
			findings = append(findings, o.Findings...)
		}
	}
	if res.LastStep < 1 {
		paths := make([]string, len(files))
		for i, f := range files {
			paths[i] = f.Path
		}
		if err := a.checkpoint(ctx, 1, stepOutput{Step: "load", PR: pr.Ref(), Files: paths, By: a.cfg.ID}, false); err != nil {
			return err
		}
		a.out.event("step", fmt.Sprintf("step 1/%d: loaded %s from the store (%d files)", total, pr.Ref(), len(files)),
			map[string]any{"run_id": runID, "step": 1, "total": total})
	}
	for i, f := range files {
		step := int64(i + 2)
		if step <= res.LastStep {
			continue
		}
		if err := a.work(ctx); err != nil {
			return err
		}
		fs, err := review.ReviewFile(a.cfg.Kind, f)
		if err != nil {
			return err
		}
		for i := range fs {
			fs[i].By, fs[i].Attempt = a.cfg.ID, res.Meta.Attempt
		}
		if err := a.checkpoint(ctx, step, stepOutput{Step: "file", File: f.Path, Findings: fs, By: a.cfg.ID}, false); err != nil {
			return err
		}
		findings = append(findings, fs...)
		a.out.event("step", fmt.Sprintf("step %d/%d: %s: %s", step, total, f.Path, countFindings(fs)),
			map[string]any{"run_id": runID, "step": step, "total": total, "file": f.Path, "findings": len(fs)})
	}
	if err := a.work(ctx); err != nil {
		return err
	}
	review.SortFindings(findings)
	if err := a.publish(ctx, parent, runID, res.Meta.Attempt, pr, len(files), findings); err != nil {
		return err
	}
	if err := a.checkpoint(ctx, total, stepOutput{Step: "publish", Total: len(findings), By: a.cfg.ID}, true); err != nil {
		return err
	}
	a.out.event("done", fmt.Sprintf("finished %s: %s", runID, countFindings(findings)),
		map[string]any{"run_id": runID, "step": total, "total": total, "findings": len(findings)})
	return nil
}

// countFindings summarises findings: "3 findings (1 high, 2 low)".
func countFindings(fs []review.Finding) string {
	if len(fs) == 0 {
		return "no findings"
	}
	by := map[string]int{}
	for _, f := range fs {
		by[f.Severity]++
	}
	var parts []string
	for _, s := range review.Severities {
		if by[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", by[s], s))
		}
	}
	noun := "findings"
	if len(fs) == 1 {
		noun = "finding"
	}
	return fmt.Sprintf("%d %s (%s)", len(fs), noun, strings.Join(parts, ", "))
}

// A reviewResult is what a reviewer writes to findings/<kind>.
type reviewResult struct {
	Kind     string           `json:"kind"`
	Agent    string           `json:"agent"`
	Lang     string           `json:"lang"`
	RunID    string           `json:"run_id"`
	Attempt  int64            `json:"attempt"`
	Fence    int64            `json:"fence"`
	About    string           `json:"about"`
	Files    int              `json:"files_reviewed"`
	Summary  string           `json:"summary"`
	Findings []review.Finding `json:"findings"`
}

// A comment is one reviewer's entry in the shared comment thread.
type comment struct {
	Kind       string  `json:"kind"`
	Agent      string  `json:"agent"`
	Summary    string  `json:"summary"`
	LeaseFence int64   `json:"lease_fence"`
	At         float64 `json:"at"`
}

// publish writes the findings and, holding the comment-thread lease, the
// reviewer's entry in the thread shared by all reviewers. Publishing again
// (a successor after a crash) replaces the kind's entry: no duplicates.
func (a *agent) publish(ctx context.Context, parent, runID string, attempt int64, pr review.PR, files int, findings []review.Finding) error {
	res := reviewResult{Kind: a.cfg.Kind, Agent: a.cfg.ID, Lang: "go", RunID: runID, Attempt: attempt, Fence: a.fence,
		About: review.About(a.cfg.Kind), Files: files, Summary: countFindings(findings), Findings: findings}
	if res.Findings == nil {
		res.Findings = []review.Finding{}
	}
	if err := a.callInto(ctx, "state_set", map[string]any{"key": findingsKey(parent, a.cfg.Kind), "value": res,
		"agent_id": a.cfg.ID, "ttl_seconds": dataTTLSeconds}, nil); err != nil {
		return err
	}
	lease, err := a.acquire(ctx, commentsLease(parent))
	if err != nil {
		return err
	}
	var cur getResult
	if err := a.callInto(ctx, "state_get", map[string]any{"key": commentsKey(parent)}, &cur); err != nil {
		return err
	}
	var thread []comment
	if cur.Found {
		_ = json.Unmarshal(cur.Value, &thread)
	}
	mine := comment{Kind: a.cfg.Kind, Agent: a.cfg.ID, Summary: res.Summary, LeaseFence: lease, At: epoch(time.Now())}
	replaced := false
	for i := range thread {
		if thread[i].Kind == a.cfg.Kind {
			thread[i], replaced = mine, true
		}
	}
	if !replaced {
		thread = append(thread, mine)
	}
	version := int64(0)
	if cur.Found && cur.Version != nil {
		version = *cur.Version
	}
	if err := a.callInto(ctx, "state_set", map[string]any{"key": commentsKey(parent), "value": thread, "agent_id": a.cfg.ID,
		"if_version": version, "ttl_seconds": dataTTLSeconds}, nil); err != nil {
		return err
	}
	a.out.event("published", fmt.Sprintf("posted to the shared comment thread under lease fence %d", lease),
		map[string]any{"run_id": runID, "lease_fence": lease})
	return a.callInto(ctx, "lease_release", map[string]any{"resource_id": commentsLease(parent), "holder_id": a.cfg.ID}, nil)
}

// acquire takes the lease on resource, waiting while another agent holds
// it, and returns its fence.
func (a *agent) acquire(ctx context.Context, resource string) (int64, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var l leaseResult
		if err := a.callInto(ctx, "lease_acquire", map[string]any{"resource_id": resource, "holder_id": a.cfg.ID,
			"ttl_seconds": 10}, &l); err != nil {
			return 0, err
		}
		if l.Acquired {
			return *l.Fence, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the lease %s stayed held by %s", resource, deref(l.Holder))
		}
		a.out.event("lease_wait", fmt.Sprintf("%s is held by %s: waiting", resource, deref(l.Holder)), nil)
		if err := pause.Sleep(ctx, 300*time.Millisecond); err != nil {
			return 0, err
		}
	}
}
