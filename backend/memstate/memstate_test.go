package memstate_test

import (
	"testing"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/memstate"
)

func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		d := memstate.New()
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}
