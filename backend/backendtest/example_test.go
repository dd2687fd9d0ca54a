package backendtest_test

import (
	"fmt"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/memstate"
)

// A driver's whole test is one call to Run from its test function:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Driver {
//			d := memstate.New()
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// Run also runs every case through HideOptional, which strips a driver's
// fast paths so that package state takes its portable fallbacks.
func ExampleHideOptional() {
	d := memstate.New()
	defer d.Close()
	_, native := backend.Driver(d).(backend.Updater)
	_, hidden := backendtest.HideOptional(d).(backend.Updater)
	fmt.Println(native, hidden)
	// Output: true false
}
