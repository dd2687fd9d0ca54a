package main

// The fan-out / fan-in seam of the pipeline. Everything that knows how the
// review run relates to its three reviewer runs is in this file:
//
//   - createPipeline (fan-out, called by the dashboard's Register Workflow)
//     creates the review run as a join parent (workflow_create join=true)
//     and one reviewer run per kind as its child (parent_run_id);
//   - reviewProgress reads where each reviewer run is (the dashboard's
//     Aggregate Reviews checks it before starting the aggregator), from the
//     review run's children (workflow_discover parent_run_id);
//   - openReview and awaitReviews (fan-in, for the aggregator agent) find
//     the review run and wait, with workflow_wait long-polls and no polling
//     loop, until the sidecar releases it: a join parent stays "waiting",
//     and cannot be claimed, until every child is done or failed; the
//     commit that finishes the last one makes it "created", claimable like
//     a fresh run, so exactly one aggregator claims it.
//
// The reviewer runs also carry the review run's id as their "parent" tag:
// that is how a reviewer (the Node one too) finds the pull request's keys,
// not how the runs are joined.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"
)

// A pipeline is one registered review: the review run and its reviewer
// runs by kind.
type pipeline struct {
	Parent   string            `json:"parent"`
	Children map[string]string `json:"children"`
}

// createPipeline registers the review of pr: the review run (the join
// parent the aggregator finishes) and a reviewer run per kind as its
// children. No reviewer can finish before the last child exists (agents
// are spawned only once the pipeline is registered), so the join cannot
// release early.
func createPipeline(ctx context.Context, c caller, demo string, pr review.PR) (pipeline, error) {
	var parent struct {
		RunID string `json:"run_id"`
	}
	tags := aggregatorTags(demo)
	tags["pr"] = pr.Ref()
	if err := c.callInto(ctx, "workflow_create", map[string]any{"name": "pr-review " + pr.Ref(), "tags": tags, "join": true}, &parent); err != nil {
		return pipeline{}, err
	}
	p := pipeline{Parent: parent.RunID, Children: map[string]string{}}
	for _, kind := range review.Kinds {
		var child struct {
			RunID string `json:"run_id"`
		}
		tags := reviewerTags(demo, kind)
		tags[tagParent] = p.Parent
		tags["pr"] = pr.Ref()
		if err := c.callInto(ctx, "workflow_create", map[string]any{"name": kind + "-review " + pr.Ref(), "tags": tags,
			"parent_run_id": p.Parent}, &child); err != nil {
			return p, err
		}
		p.Children[kind] = child.RunID
	}
	return p, nil
}

// childRuns returns the reviewer runs of the review run parent, by kind.
func childRuns(ctx context.Context, c caller, parent string) (map[string]runInfo, error) {
	var res runsResult
	err := c.callInto(ctx, "workflow_discover", map[string]any{"parent_run_id": parent}, &res)
	if err != nil {
		return nil, err
	}
	out := map[string]runInfo{}
	for _, r := range res.Runs {
		out[r.Tags[tagKind]] = r
	}
	return out, nil
}

// reviewProgress says which reviews are not finished yet: nil when all are,
// else one phrase per open review ("Performance (running, attempt 2)").
func reviewProgress(ctx context.Context, c caller, parent string) ([]string, map[string]runInfo, error) {
	runs, err := childRuns(ctx, c, parent)
	if err != nil {
		return nil, nil, err
	}
	var open []string
	for _, kind := range review.Kinds {
		r, ok := runs[kind]
		switch {
		case !ok:
			open = append(open, kindTitle(kind)+" (no run)")
		case !finished(r.Status):
			s := r.Status
			if r.Status == "created" {
				s = "not started"
			} else if r.Attempt > 0 {
				s += fmt.Sprintf(", attempt %d", r.Attempt)
			}
			open = append(open, kindTitle(kind)+" ("+s+")")
		}
	}
	return open, runs, nil
}

// openReview returns the demo's review run that is not finished yet,
// whatever its status (a join parent still waiting for its reviews is not
// claimable, so workflow_discover claimable=true would not show it); nil
// when there is none.
func openReview(ctx context.Context, c caller, demo string) (*runInfo, error) {
	var res runsResult
	if err := c.callInto(ctx, "workflow_discover", map[string]any{"tags": aggregatorTags(demo)}, &res); err != nil {
		return nil, err
	}
	for i, r := range res.Runs {
		if !finished(r.Status) {
			return &res.Runs[i], nil
		}
	}
	return nil, nil
}

// released are the statuses of a join parent that no longer waits for its
// children.
var released = []string{"created", "claimed", "running", "done", "failed"}

// awaitReviews blocks until the sidecar releases the review run parent
// (every reviewer run finished, done or failed) and returns the reviewer
// runs by kind. It long-polls workflow_wait on parent, which answers as
// soon as the commit finishing the last review releases it; each long-poll
// lasts at most 30 s, after which progress is told which reviews are still
// open (as it is at the start).
func awaitReviews(ctx context.Context, c caller, parent string, progress func(open []string)) (map[string]runInfo, error) {
	var last []string
	for {
		open, runs, err := reviewProgress(ctx, c, parent)
		if err != nil {
			return nil, err
		}
		if len(open) == 0 {
			return runs, nil
		}
		if !slices.Equal(open, last) {
			progress(open)
			last = open
		}
		timeout := 30 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(dl))
		}
		if timeout < time.Second {
			return nil, fmt.Errorf("still waiting for %s: %w", strings.Join(open, ", "), context.DeadlineExceeded)
		}
		var w struct {
			Reached bool `json:"reached"`
		}
		if err := c.callInto(ctx, "workflow_wait", map[string]any{"run_id": parent, "until": released,
			"timeout_seconds": timeout.Seconds()}, &w); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("still waiting for %s: %w", strings.Join(open, ", "), ctx.Err())
			}
			return nil, err
		}
	}
}
