package pgtest_test

import (
	"fmt"
	"time"

	"github.com/statesidecar/state/internal/pgtest"
)

// A race test records each call's start and end and checks that two of
// them overlapped, so that it fails when its goroutines ran one by one.
func ExampleOverlapped() {
	t0 := time.Unix(0, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	oneByOne := [][2]time.Time{{at(0), at(10)}, {at(10), at(20)}}
	raced := [][2]time.Time{{at(0), at(10)}, {at(5), at(15)}}
	fmt.Println(pgtest.Overlapped(oneByOne), pgtest.Overlapped(raced))
	// Output: false true
}
