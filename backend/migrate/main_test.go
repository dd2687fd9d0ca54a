package migrate_test

import (
	"testing"

	"github.com/statesidecar/state/internal/skipnote"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(skipnote.Wrap(m)) }
