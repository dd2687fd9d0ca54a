package mcpadapter_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
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

	"github.com/statesidecar/state/internal/syncbuf"
)

// faultyDriver is a memory backend whose reads panic or fail on demand.
type faultyDriver struct {
	*memstate.Driver
	panics atomic.Bool
	down   atomic.Bool
	hang   atomic.Bool // Get waits for its context to end
}

var errDown = errors.New("dial tcp 10.0.0.9:6379: connect: connection refused")

func (d *faultyDriver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	if d.panics.Load() {
		panic("driver bug")
	}
	if d.down.Load() {
		return backend.Record{}, errDown
	}
	if d.hang.Load() {
		<-ctx.Done()
		return backend.Record{}, fmt.Errorf("get %s: %w", key, ctx.Err())
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
	st, err := state.New(d, &state.Options{Clock: statetest.NewClock(), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, d
}

// logger returns a logger that writes to buf.
func logger(buf *syncbuf.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

var errorID = regexp.MustCompile(`\(error id ([0-9a-f]{16}); the details are in the server's log\)`)

// hiddenError checks that a client's error text names nothing of the
// backend but carries an error id, and that the log has the details under
// that id.
func hiddenError(t *testing.T, text, detail string, log *syncbuf.Buffer) {
	t.Helper()
	if strings.Contains(text, detail) || strings.Contains(text, "10.0.0.9") {
		t.Errorf("a client's error names the backend: %s", text)
	}
	m := errorID.FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("a hidden error must carry an error id: %s", text)
	}
	for l := range strings.Lines(log.String()) {
		if strings.Contains(l, "error_id="+m[1]) && strings.Contains(l, detail) {
			return
		}
	}
	t.Errorf("no log line has error id %s and %q:\n%s", m[1], detail, log.String())
}

// TestPanicIsRecovered mounts the tools on a host server without
// server.WithRecovery: a panic inside the store still becomes a tool error
// rather than crashing the in-process caller, and the panic's text goes to
// the log, not to the client.
func TestPanicIsRecovered(t *testing.T) {
	st, d := faultyStore(t)
	var observed atomic.Value
	var log syncbuf.Buffer
	s := server.NewMCPServer("host", "1.0.0")
	mcpadapter.Register(s, st, &mcpadapter.Options{Logger: logger(&log), Observe: func(tool string, _ time.Duration, isError bool) {
		observed.Store([2]any{tool, isError})
	}})
	c := connect(t, s)
	d.panics.Store(true)
	msg := c.fail("state_get", `{"key":"k"}`)
	if !strings.HasPrefix(msg, "Error calling tool 'state_get': internal error: the tool panicked (error id ") {
		t.Errorf("panic: %s", msg)
	}
	hiddenError(t, msg, "driver bug", &log)
	if got := observed.Load(); got != [2]any{"state_get", true} {
		t.Errorf("Observe saw %v, want state_get as an error", got)
	}
	d.panics.Store(false)
	c.ok("state_get", `{"key":"k"}`)
}

// TestBackendOutage: a backend failure reaches the client as a stable
// message with an error id, never the backend's address or the driver's
// words; those go to the log with the same id.
func TestBackendOutage(t *testing.T) {
	st, d := faultyStore(t)
	var log syncbuf.Buffer
	c := connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{Logger: logger(&log)}))
	d.down.Store(true)
	msg := c.fail("state_get", `{"key":"k"}`)
	if !strings.HasPrefix(msg, "Error calling tool 'state_get': the store could not complete the call (error id ") {
		t.Errorf("outage: %s", msg)
	}
	hiddenError(t, msg, errDown.Error(), &log)
	h := c.ok("sidecar_health", ``)
	status := str(t, h, "status")
	if !strings.HasPrefix(status, "error: the backend did not answer (error id ") {
		t.Errorf("health during an outage = %s, want status error: and an error id", h)
	}
	hiddenError(t, status, errDown.Error(), &log)
	d.down.Store(false)
	equal(t, "health after the outage", str(t, c.ok("sidecar_health", ``), "status"), "ok")

	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	c.wantErr("state_set", `{"key":"k","value":1}`, `state: kv.set "k": store is closed`)
}

// A call that outlives its deadline says so, with an error id.
func TestDeadlineIsAStableMessage(t *testing.T) {
	st, d := faultyStore(t)
	var log syncbuf.Buffer
	c := connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{Logger: logger(&log)}))
	d.hang.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	res := c.callCtx(ctx, "state_get", `{"key":"k"}`)
	msg := textOf(t, res)
	if !res.IsError || !strings.Contains(msg, "did not finish before its deadline") {
		t.Errorf("a call past its deadline: %s", msg)
	}
	hiddenError(t, msg, "context deadline exceeded", &log)
}
