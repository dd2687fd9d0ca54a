package redisstate_test

import (
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/backendtest"
)

// TestHistorySoak writes for a while (backendtest.SoakEnv sets how long;
// the default is short) and checks that history stays within its limit
// throughout, with the background sweeper off. The gauge is the memory
// Redis uses for the namespace's event log.
func TestHistorySoak(t *testing.T) {
	const limit = 2_000
	rdb := sharedClient(t)
	d := newDriver(t, rdb)
	st, err := state.New(d, &state.Options{SweepInterval: -1, HistoryMaxEvents: limit, Namespace: "soak"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := "{" + d.Prefix() + ":soak}:ev"
	samples := backendtest.HistorySoak(t, st, limit, backendtest.SoakDuration(t, time.Second), func() int64 {
		n, _ := rdb.MemoryUsage(ctx, log).Result()
		return n
	})
	for _, s := range samples {
		t.Logf("%8v %10d writes %7d events %10d bytes of event log", s.At, s.Writes, s.Events, s.Gauge)
	}
}
