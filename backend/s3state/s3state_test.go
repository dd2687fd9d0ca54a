package s3state_test

import (
	"context"
	"testing"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/objstate"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/s3test"
)

// small makes heads hand their commits to segments and snapshots often, so
// that the suite goes through them too.
var small = objstate.Options{TailBytes: 4 << 10, MaxSegments: 4, SnapshotMinBytes: 32 << 10, SnapshotPartBytes: 16 << 10}

func open(t *testing.T, o s3state.Options) backend.Driver {
	t.Helper()
	o.Driver = small
	d, err := s3state.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// TestConformanceGofakes3 runs the suite on gofakes3, in process.
func TestConformanceGofakes3(t *testing.T) {
	f := s3test.NewFake(t, nil)
	o := f.Options("conformance")
	backendtest.Run(t, func(t *testing.T) backend.Driver { return open(t, o) })
}

// TestConformance runs the suite on the server of STATE_TEST_S3_URL
// (versitygw in CI).
func TestConformance(t *testing.T) {
	o := s3test.Options(t)
	backendtest.Run(t, func(t *testing.T) backend.Driver { return open(t, o) })
}
