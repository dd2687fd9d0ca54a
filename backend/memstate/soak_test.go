package memstate_test

import (
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/memstate"
)

// TestHistorySoak writes for a while (backendtest.SoakEnv sets how long;
// the default is short) and checks that history stays within its limit
// throughout, with the background sweeper off.
func TestHistorySoak(t *testing.T) {
	const limit = 2_000
	st, err := state.New(memstate.New(), &state.Options{SweepInterval: -1, HistoryMaxEvents: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	samples := backendtest.HistorySoak(t, st, limit, backendtest.SoakDuration(t, time.Second), nil)
	for _, s := range samples {
		t.Logf("%8v %10d writes %7d events", s.At, s.Writes, s.Events)
	}
}
