package sidecar

import (
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
)

// SIDECAR_STATEFUL=true: older clients get a session (and may hold a GET
// stream), which a shutdown must end rather than wait for.
func TestStatefulSessionsAndShutdown(t *testing.T) {
	cfg := memConfig()
	cfg.Stateful = true
	r := startHTTP(t, cfg)
	//lint:ignore SA1019 the legacy GET stream of older clients is exactly what stateful mode serves
	c := connect(t, r.URL, true, transport.WithContinuousListening())
	if c.GetSessionId() == "" {
		t.Error("a stateful sidecar must issue a session id to an older client")
	}
	call(t, c, "state_set", map[string]any{"key": "k", "value": "v"})
	if got := call(t, c, "state_get", map[string]any{"key": "k"}); got["value"] != "v" {
		t.Errorf("state_get: %v", got)
	}
	modern := connect(t, r.URL, false)
	call(t, modern, "state_get", map[string]any{"key": "k"})

	eventually(t, "the client's GET stream", func() bool { return metric(t, r.URL, MetricHTTPInFlight) == 1 })
	if err := r.shutdown(); err != nil {
		t.Fatalf("an open GET stream must not hold the shutdown to its deadline: %v", err)
	}
}
