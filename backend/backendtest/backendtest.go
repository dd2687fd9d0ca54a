// Package backendtest is the conformance suite every backend of package
// state passes. A driver's test calls Run from one test function:
//
//	func TestConformance(t *testing.T) {
//		backendtest.Run(t, func(t *testing.T) backend.Driver {
//			d, err := mydriver.Open(...)
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// Run checks the driver contract of package backend first, then the
// semantics package state builds on it (key-value entries, workflows,
// leases, sessions, history, health, namespaces, bad input, races), once
// through the driver's native fast paths and once through the portable
// fallbacks (HideOptional). Among the contract's cases, the driver's fast
// paths (Claimer, Leaser, Updater, a faster Set for backend.IntentSet)
// must write exactly the records and history the portable code writes,
// byte for byte, and serve every call of a story themselves. Time comes from a fake clock starting in 2030:
// no test sleeps to let a TTL pass, and a driver that reads its own clock
// when given a time fails.
package backendtest

import (
	"crypto/rand"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/statetest"
)

// Run runs the conformance suite. newDriver is called once per subtest (the
// subtests run in parallel); it may return drivers sharing one server, since
// every subtest works in namespaces of its own, and should close the driver
// with t.Cleanup (the suite closes some itself; a second Close is harmless).
func Run(t *testing.T, newDriver func(t *testing.T) backend.Driver) {
	t.Run("Driver", func(t *testing.T) { runDriver(t, newDriver) })
	t.Run("Store", func(t *testing.T) { runStore(t, newDriver) })
	t.Run("StoreFallback", func(t *testing.T) {
		runStore(t, func(t *testing.T) backend.Driver { return HideOptional(newDriver(t)) })
	})
}

// RunEncrypted runs the store semantics of the suite (not the driver
// contract, which is below encryption) on stores with encryption at rest
// enc (state.Options.Encryption), through the driver's fast paths and
// through the portable fallbacks: sealing at the gate must change nothing
// a caller sees.
func RunEncrypted(t *testing.T, newDriver func(t *testing.T) backend.Driver, enc state.Encryption) {
	withEnc := func(t *testing.T) backend.Driver { return encrypted{newDriver(t), enc} }
	t.Run("Store", func(t *testing.T) { runStore(t, withEnc) })
	t.Run("StoreFallback", func(t *testing.T) {
		runStore(t, func(t *testing.T) backend.Driver {
			d := newDriver(t)
			return encrypted{HideOptional(d), enc}
		})
	})
}

// encrypted marks a driver whose stores the suite opens with encryption.
type encrypted struct {
	backend.Driver
	enc state.Encryption
}

// HideOptional returns d with only the methods of backend.Driver, so that
// package state takes its portable fallbacks instead of d's fast paths.
func HideOptional(d backend.Driver) backend.Driver { return plainDriver{d} }

type plainDriver struct{ backend.Driver }

// newNS returns a fresh namespace name.
func newNS() string { return "t" + rand.Text()[:12] }

type testCase[T any] struct {
	name string
	fn   func(t *testing.T, x T)
}

// driverEnv is what a driver contract case works with.
type driverEnv struct {
	d  backend.Driver
	ns string
}

// storeEnv is what a store semantics case works with.
type storeEnv struct {
	st  *state.Store
	clk *statetest.Clock
	// newDriver opens another driver like the store's.
	newDriver func(t *testing.T) backend.Driver
}

func runDriver(t *testing.T, newDriver func(t *testing.T) backend.Driver) {
	var cases []testCase[driverEnv]
	for _, group := range [][]testCase[driverEnv]{driverCases(), tenancyCases(), retentionDriverCases(), pingCases(), pathCases()} {
		cases = append(cases, group...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, driverEnv{d: newDriver(t), ns: newNS()})
		})
	}
}

func runStore(t *testing.T, newDriver func(t *testing.T) backend.Driver) {
	var cases []testCase[storeEnv]
	for _, group := range [][]testCase[storeEnv]{kvCases(), workflowCases(), deleteRunCases(), discoverCases(), leaseCases(),
		sessionCases(), historyCases(), storeCases(), badInputCases(), raceCases(), updateCases(), expiryCases(), retentionCases(),
		childrenCases(), waitCases()} {
		cases = append(cases, group...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, newStoreEnv(t, newDriver))
		})
	}
}

func newStoreEnv(t *testing.T, newDriver func(t *testing.T) backend.Driver) storeEnv {
	clk := statetest.NewClock()
	d := newDriver(t)
	o := &state.Options{Clock: yieldingClock{clk}, SweepInterval: -1, Namespace: newNS()}
	if e, ok := d.(encrypted); ok {
		d, o.Encryption = e.Driver, e.enc
	}
	st, err := state.New(d, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return storeEnv{st: st, clk: clk, newDriver: newDriver}
}
