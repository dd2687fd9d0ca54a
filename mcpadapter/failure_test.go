package mcpadapter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// faultyDriver is a memory backend whose reads panic or fail on demand.
type faultyDriver struct {
	*memstate.Driver
	panics atomic.Bool
	down   atomic.Bool
}

var errDown = errors.New("dial tcp 10.0.0.9:6379: connect: connection refused")

func (d *faultyDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	if d.panics.Load() {
		panic("driver bug")
	}
	if d.down.Load() {
		return backend.Record{}, errDown
	}
	return d.Driver.Get(ctx, ns, key, now)
}

func (d *faultyDriver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	if d.down.Load() {
		return backend.Counts{}, errDown
	}
	return d.Driver.Count(ctx, q)
}

func faultyStore(t *testing.T) (*state.Store, *faultyDriver) {
	d := &faultyDriver{Driver: memstate.New()}
	st := state.New(d, &state.Options{Clock: statetest.NewClock(), SweepInterval: -1})
	t.Cleanup(func() { _ = st.Close() })
	return st, d
}

// TestPanicIsRecovered mounts the tools on a host server without
// server.WithRecovery: a panic inside the store still becomes a tool error
// rather than crashing the in-process caller.
func TestPanicIsRecovered(t *testing.T) {
	st, d := faultyStore(t)
	var observed atomic.Value
	s := server.NewMCPServer("host", "1.0.0")
	mcpadapter.Register(s, st, &mcpadapter.Options{Observe: func(tool string, _ time.Duration, isError bool) {
		observed.Store([2]any{tool, isError})
	}})
	c := connect(t, s)
	d.panics.Store(true)
	c.wantErr("state_get", `{"key":"k"}`, "internal error: the tool panicked: driver bug")
	if got := observed.Load(); got != [2]any{"state_get", true} {
		t.Errorf("Observe saw %v, want state_get as an error", got)
	}
	d.panics.Store(false)
	c.ok("state_get", `{"key":"k"}`)
}

func TestBackendOutage(t *testing.T) {
	st, d := faultyStore(t)
	c := connect(t, mcpadapter.NewServer(st, nil))
	d.down.Store(true)
	c.wantErr("state_get", `{"key":"k"}`, `state: kv.get "k": `+errDown.Error())
	h := c.ok("sidecar_health", ``)
	if !strings.HasPrefix(str(t, h, "status"), "error: ") || !strings.Contains(h, errDown.Error()) {
		t.Errorf("health during an outage = %s, want status error: and the reason", h)
	}
	d.down.Store(false)
	equal(t, "health after the outage", str(t, c.ok("sidecar_health", ``), "status"), "ok")

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	c.wantErr("state_set", `{"key":"k","value":1}`, `state: kv.set "k": store is closed`)
}
