package spantest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/statesidecar/state/internal/spantest"
)

// A span a test's code starts and ends is in the exporter.
func ExampleNamed() {
	t := &testing.T{} // in a test, the test's own
	tp, exp := spantest.New(t)
	_, span := tp.Tracer("example").Start(context.Background(), "work")
	span.End()
	fmt.Println(spantest.Named(t, exp, "work").Name)
	// Output:
	// work
}
