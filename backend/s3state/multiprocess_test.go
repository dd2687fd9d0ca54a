package s3state_test

import (
	"testing"

	"github.com/statesidecar/state/internal/proctest"
	"github.com/statesidecar/state/internal/s3test"
)

// Tests in this file run the test binary again as child processes that
// share one bucket (internal/proctest): on the server of STATE_TEST_S3_URL
// (versitygw in CI), and on gofakes3 in this process.

// urls returns the stores the multi-process tests run on.
func urls(t *testing.T) map[string]string {
	s3test.SetEnv(t)
	out := map[string]string{"gofakes3": s3test.NewFake(t, nil).URL("multi")}
	if u := s3test.OptionalURL(t); u != "" {
		out["server"] = u
	}
	return out
}

func TestTwoProcessesRacingOnOneBucketHaveOneWinnerEach(t *testing.T) {
	for name, u := range urls(t) {
		t.Run(name, func(t *testing.T) { proctest.Race(t, u) })
	}
}

func TestFencesNeverGoBackAcrossProcesses(t *testing.T) {
	for name, u := range urls(t) {
		t.Run(name, func(t *testing.T) { proctest.Fences(t, u) })
	}
}

func TestTwoBusyProcessesBothWrite(t *testing.T) {
	for name, u := range urls(t) {
		t.Run(name, func(t *testing.T) { proctest.Share(t, u) })
	}
}

func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	for name, u := range urls(t) {
		t.Run(name, func(t *testing.T) { proctest.KilledWriter(t, u, nil) })
	}
}
