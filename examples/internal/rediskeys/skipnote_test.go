package rediskeys_test

import (
	"os"
	"testing"

	"github.com/statesidecar/state/internal/skipnote"
)

// TestMain prints one line, even without -v, when a suite skipped for want
// of a STATE_TEST_* variable, naming it.
func TestMain(m *testing.M) { os.Exit(skipnote.Run(m)) }
