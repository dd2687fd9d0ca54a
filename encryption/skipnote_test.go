package encryption_test

import (
	"os"
	"testing"

	"github.com/statesidecar/state/internal/s3test"
	"github.com/statesidecar/state/internal/skipnote"
)

// TestMain prints one line, even without -v, when a suite skipped for want
// of a STATE_TEST_* variable, naming it, and stops the S3 gateway the
// tests started, if any (s3test.EnvGateway).
func TestMain(m *testing.M) {
	code := skipnote.Run(m)
	s3test.StopGateway()
	os.Exit(code)
}
