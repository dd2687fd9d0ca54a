package benchvs_test

import (
	"fmt"
	"sync/atomic"

	"github.com/statesidecar/state/internal/benchvs"
)

// Parallel numbers the operations it performs from next, with as many
// goroutines as asked, and reports the first error.
func ExampleParallel() {
	var next, sum atomic.Int64
	var failed atomic.Value
	benchvs.Parallel(4, 100, &next, func(i int64) error { sum.Add(i); return nil }, &failed)
	fmt.Println(next.Load(), sum.Load(), failed.Load())
	// Output: 100 4950 <nil>
}
