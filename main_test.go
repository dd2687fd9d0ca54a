package state_test

import (
	"testing"

	"github.com/statesidecar/state/internal/skipnote"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// store, keep-alive and sweeper a test starts must end when it is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.Wrap(m)) }
