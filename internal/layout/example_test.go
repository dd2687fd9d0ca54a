package layout_test

import (
	"fmt"
	"slices"

	"github.com/statesidecar/state/internal/layout"
)

// A run is listed in every index of its status; finishing it moves it out
// of the open ones, and the counters say what changed.
func Example() {
	v := layout.RunValue{Status: layout.Claimed, AgentID: "A", Name: "job", Tags: map[string]string{"repo": "x"},
		CreatedAt: 1893456000000}
	keys := layout.IndexKeys("wf-000000000001", &v)
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Println(k)
	}
	fmt.Println(layout.CountDeltas(layout.Created, layout.Claimed))
	fmt.Println(layout.CountDeltas(layout.Claimed, layout.Done))
	// Output:
	// i/a/7ffffe47253a4bff/wf-000000000001
	// i/o/7ffffe47253a4bff/wf-000000000001
	// i/ot/repo/x/7ffffe47253a4bff/wf-000000000001
	// i/s/unstarted/7ffffe47253a4bff/wf-000000000001
	// i/t/repo/x/7ffffe47253a4bff/wf-000000000001
	// map[claimed:1]
	// map[claimed:-1 done:1 unstarted:-1]
}
