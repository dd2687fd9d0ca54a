package filestate_test

import (
	"context"
	"testing"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/backend/objstate"
)

// open opens a driver on dir with small tails, so that the suite goes
// through segments and snapshots too.
func open(t *testing.T, dir string) backend.Driver {
	t.Helper()
	d, err := filestate.Open(context.Background(), dir, &filestate.Options{
		Driver: objstate.Options{TailBytes: 4 << 10, MaxSegments: 4, SnapshotMinBytes: 32 << 10, SnapshotPartBytes: 16 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	dir := t.TempDir()
	backendtest.Run(t, func(t *testing.T) backend.Driver { return open(t, dir) })
}
