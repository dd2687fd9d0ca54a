package sidecar

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/syncbuf"
)

// Every tool call has a deadline: a backend that does not answer makes the
// call fail with a stable message and an error id once RequestTimeout has
// passed, and the client never sees the backend's address.
func TestRequestDeadlineOverHTTP(t *testing.T) {
	cfg, d := faultConfig(t)
	cfg.RequestTimeout = 200 * time.Millisecond
	r := startHTTP(t, cfg)
	c := connect(t, r.URL, false)
	d.slow.Store(true)
	msg := callErr(t, c, "state_get", map[string]any{"key": "k"})
	if !strings.Contains(msg, "did not finish before its deadline") || !strings.Contains(msg, "error id ") {
		t.Errorf("a call on a backend that does not answer: %q", msg)
	}
	d.slow.Store(false)
	d.down.Store(true)
	msg = callErr(t, c, "state_get", map[string]any{"key": "k"})
	if strings.Contains(msg, "10.9.8.7") || !strings.Contains(msg, "error id ") {
		t.Errorf("a backend failure must not show the backend to the client: %q", msg)
	}
}

// On stdio too.
func TestRequestDeadlineOverStdio(t *testing.T) {
	cfg, d := faultConfig(t)
	cfg.Transport, cfg.RequestTimeout = TransportStdio, 200*time.Millisecond
	sc, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	d.slow.Store(true)
	out := runStdio(t, sc, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"k"}}}`)
	if !strings.Contains(out, `"isError":true`) || !strings.Contains(out, "did not finish before its deadline") {
		t.Errorf("stdio call on a backend that does not answer: %s", out)
	}
}

// runStdio serves one line of input on stdio and returns the output.
func runStdio(t *testing.T, sc *Sidecar, line string) string {
	t.Helper()
	var out syncbuf.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if err := sc.ServeStdio(ctx, strings.NewReader(line+"\n"), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// Over stdio a number beyond float64 reaches the tools too.
func TestStdioNumbersBeyondFloat64(t *testing.T) {
	sc := newStdioSidecar(t)
	out := runStdio(t, sc, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1,"ttl_seconds":1e309}}}`)
	if !strings.Contains(out, `"isError":true`) || !strings.Contains(out, "ttl_seconds is too large, got 1e309") {
		t.Errorf("ttl_seconds 1e309 over stdio: %s", out)
	}
}

// /readyz asks the store (Store.Ping): 503 while the backend fails, with
// the reason in the log only.
func TestReadyzFollowsThePing(t *testing.T) {
	cfg, d := faultConfig(t)
	r := startHTTP(t, cfg)
	if code, _ := get(t, r.URL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d", code)
	}
	d.down.Store(true)
	code, body := get(t, r.URL+"/readyz")
	if code != http.StatusServiceUnavailable || strings.Contains(body, "10.9.8.7") {
		t.Errorf("/readyz with the backend down: %d %s; want 503 naming nothing of the backend", code, body)
	}
	if code, _ := get(t, r.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz does not depend on the backend: %d", code)
	}
	d.down.Store(false)
	if code, _ := get(t, r.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz after the backend came back: %d", code)
	}
}
