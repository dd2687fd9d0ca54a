package main

// The fan-out / fan-in seam of the pipeline. Everything that knows how the
// review run relates to its three reviewer runs is in this file:
//
//   - createPipeline (fan-out, called by the dashboard's Register Workflow)
//     creates the review run and one reviewer run per kind, linked by a
//     "parent" tag;
//   - reviewProgress reads where each reviewer run is (the dashboard's
//     Aggregate Reviews checks it before starting the aggregator);
//   - awaitReviews (fan-in, called by the aggregator agent) waits until
//     every reviewer run has finished.
//
// Today they use only the 19 tools: the link is a tag, and the wait polls
// workflow_status. Once parent/child runs land (issue 10), createPipeline
// passes parent_run_id and join: true, reviewProgress reads the
// "children" counts of workflow_status, and awaitReviews becomes one
// workflow_wait on the review run (a long-poll); since a join parent is
// claimable only once every child has finished, the aggregator's claim then
// needs no check of its own. Nothing outside this file changes.

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

// createPipeline registers the review of pr: the review run (the one the
// aggregator finishes) and a reviewer run per kind under it.
func createPipeline(ctx context.Context, c caller, demo string, pr review.PR) (pipeline, error) {
	var parent struct {
		RunID string `json:"run_id"`
	}
	tags := aggregatorTags(demo)
	tags["pr"] = pr.Ref()
	if err := c.callInto(ctx, "workflow_create", map[string]any{"name": "pr-review " + pr.Ref(), "tags": tags}, &parent); err != nil {
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
		if err := c.callInto(ctx, "workflow_create", map[string]any{"name": kind + "-review " + pr.Ref(), "tags": tags}, &child); err != nil {
			return p, err
		}
		p.Children[kind] = child.RunID
	}
	return p, nil
}

// childRuns returns the reviewer runs of the review run parent, by kind.
func childRuns(ctx context.Context, c caller, demo, parent string) (map[string]runInfo, error) {
	var res runsResult
	err := c.callInto(ctx, "workflow_discover", map[string]any{
		"tags": map[string]any{tagPipeline: pipelineName, tagDemo: demo, tagParent: parent}}, &res)
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
func reviewProgress(ctx context.Context, c caller, demo, parent string) ([]string, map[string]runInfo, error) {
	runs, err := childRuns(ctx, c, demo, parent)
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

// awaitReviews blocks until every reviewer run of parent has finished (done
// or failed), polling workflow_status, and returns them by kind. progress is
// told which reviews are still open whenever that changes.
func awaitReviews(ctx context.Context, c caller, demo, parent string, progress func(open []string)) (map[string]runInfo, error) {
	var last []string
	for {
		open, runs, err := reviewProgress(ctx, c, demo, parent)
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
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("still waiting for %s: %w", strings.Join(open, ", "), ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
