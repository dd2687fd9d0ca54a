package main

import (
	"fmt"

	"github.com/statesidecar/state/examples/prreview/review"
)

// A sidecar URL may be given with or without its /mcp endpoint.
func Example_endpointOf() {
	for _, u := range []string{"http://127.0.0.1:8000", "http://127.0.0.1:8000/mcp", "127.0.0.1:8000"} {
		ep, err := endpointOf(u)
		fmt.Println(ep, err)
	}
	// Output:
	// http://127.0.0.1:8000/mcp <nil>
	// http://127.0.0.1:8000/mcp <nil>
	//  sidecar URL "127.0.0.1:8000": want http://HOST:PORT or http://HOST:PORT/mcp
}

// An agent finds its work by tags, and keeps its results under the review
// run's prefix.
func Example_pipelineLayout() {
	fmt.Println(reviewerTags("d-1a2b3c", review.Security))
	fmt.Println(aggregatorTags("d-1a2b3c"))
	fmt.Println(findingsKey("wf-0123456789ab", review.Security), commentsLease("wf-0123456789ab"))
	fmt.Println(countFindings([]review.Finding{{Severity: "high"}, {Severity: "low"}, {Severity: "low"}}))
	// Output:
	// map[demo:d-1a2b3c kind:security pipeline:pr-review]
	// map[demo:d-1a2b3c pipeline:pr-review stage:aggregate]
	// review/wf-0123456789ab/findings/security lease/wf-0123456789ab/comments
	// 3 findings (1 high, 2 low)
}
