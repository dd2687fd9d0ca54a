package backendtest

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state/backend"
)

// pingCases check backend.Pinger.
func pingCases() []testCase[driverEnv] {
	return []testCase[driverEnv]{
		{"PingerSaysAWritableBackendCanWrite", func(t *testing.T, e driverEnv) {
			p, ok := e.d.(backend.Pinger)
			if !ok {
				t.Skip("driver has no Pinger")
			}
			is := is.New(t)
			is.NoErr(p.Ping(context.Background())) // Ping must succeed while the backend can write
		}},
	}
}
