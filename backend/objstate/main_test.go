package objstate_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// leader, a read check or a compaction of a closed driver.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
