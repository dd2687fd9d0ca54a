package s3state_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/statesidecar/state/internal/proctest"
	"github.com/statesidecar/state/internal/s3test"
	"github.com/statesidecar/state/internal/skipnote"
	"go.uber.org/goleak"
)

// TestMain runs a child role when proctest started this binary again, and
// otherwise the tests, failing them if a goroutine outlives them (once the
// S3 gateway the tests started, if any, is stopped).
func TestMain(m *testing.M) {
	proctest.Child()
	code := skipnote.Run(m)
	s3test.StopGateway()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
