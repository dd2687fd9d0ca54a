package sqlitestate_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/sqlitestate"
)

// openTemp opens a driver on a fresh file in the test's temporary directory.
func openTemp(t testing.TB) *sqlitestate.Driver {
	t.Helper()
	d, err := sqlitestate.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Driver { return openTemp(t) })
}
