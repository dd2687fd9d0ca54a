package objstate_test

import (
	"testing"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/objstate"
)

// open returns a driver over m with small tails and few segments, so that
// the suite's writes go through segments and snapshots too.
func open(t *testing.T, m objstate.Medium) *objstate.Driver {
	t.Helper()
	d, err := objstate.New(m, &objstate.Options{TailBytes: 2 << 10, MaxSegments: 4, SnapshotMinBytes: 16 << 10, SnapshotPartBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	m := newMemMedium()
	backendtest.Run(t, func(t *testing.T) backend.Driver { return open(t, m.handle()) })
}
