package main

import "github.com/statesidecar/state/examples/prreview/review"

// How the demo lays out its work in the sidecar. Every name an agent needs
// to find its work is here: agents are told only their kind and the demo
// tag, and discover the rest by tags.
const (
	// pipelineName tags every run of the demo.
	pipelineName = "pr-review"

	tagPipeline = "pipeline"
	tagDemo     = "demo"   // one dashboard's runs, so several can share a sidecar
	tagKind     = "kind"   // security, performance or style: what a reviewer run is for
	tagParent   = "parent" // a reviewer run's review run, whose id names the PR's keys (the runs are joined by parent_run_id)
	tagStage    = "stage"  // "aggregate" on the review run itself
	stageJoin   = "aggregate"

	// kindAggregator is the agent that joins the reviews.
	kindAggregator = "aggregator"

	// dataTTL bounds how long the demo's keys stay in a shared sidecar.
	dataTTLSeconds = 24 * 3600
)

// Keys of the KV store, all under the review run's prefix.
func prefixKey(parent string) string         { return "review/" + parent + "/" }
func prKey(parent string) string             { return prefixKey(parent) + "pr" }
func findingsKey(parent, kind string) string { return prefixKey(parent) + "findings/" + kind }
func commentsKey(parent string) string       { return prefixKey(parent) + "comments" }
func reportKey(parent string) string         { return prefixKey(parent) + "report" }

// commentsLease is the lease a reviewer holds while it posts to the shared
// comment thread.
func commentsLease(parent string) string { return "lease/" + parent + "/comments" }

// reviewerTags are the tags a reviewer of kind discovers its work by.
func reviewerTags(demo, kind string) map[string]any {
	return map[string]any{tagPipeline: pipelineName, tagDemo: demo, tagKind: kind}
}

// aggregatorTags are the tags the aggregator discovers the review run by.
func aggregatorTags(demo string) map[string]any {
	return map[string]any{tagPipeline: pipelineName, tagDemo: demo, tagStage: stageJoin}
}

// validKind reports whether kind names a reviewer or the aggregator.
func validKind(kind string) bool {
	for _, k := range review.Kinds {
		if k == kind {
			return true
		}
	}
	return kind == kindAggregator
}

// kindTitle is the kind as the dashboard names it.
func kindTitle(kind string) string {
	switch kind {
	case review.Security:
		return "Security"
	case review.Performance:
		return "Performance"
	case review.Style:
		return "Style"
	case kindAggregator:
		return "Aggregator"
	}
	return kind
}
