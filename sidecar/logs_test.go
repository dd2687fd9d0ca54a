package sidecar

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statesidecar/state/internal/syncbuf"
)

// A flood of one message logs a bounded number of lines; the rest are
// counted, and the next line that passes says how many it follows.
func TestLogFloodIsBounded(t *testing.T) {
	var buf syncbuf.Buffer
	reg := prometheus.NewRegistry()
	log := limitLogs(slog.New(slog.NewTextHandler(&buf, nil)), reg)
	const n = 1000
	for i := range n {
		log.With("component", "x").Error("tool call failed", "i", i)
	}
	log.Info("another message")
	lines := strings.Count(buf.String(), "tool call failed")
	m := &Metrics{reg: reg}
	dropped := gatheredCounter(t, m, MetricLogDropped, "ERROR")
	if lines >= n || lines < logBurst || float64(lines)+dropped != n {
		t.Fatalf("%d records: %d lines, %v dropped; want at least %d lines, fewer than %d, and the rest counted", n, lines, dropped, logBurst, n)
	}
	if !strings.Contains(buf.String(), "another message") {
		t.Error("another message was dropped with the flood")
	}
}

// A client that goes away during a wait is not an error in the log.
func TestClientGoneIsNotAnError(t *testing.T) {
	var buf syncbuf.Buffer
	cfg := memConfig()
	sc, err := New(t.Context(), cfg, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_wait","arguments":{"key":"k","after_version":0,"timeout_seconds":60}}}`
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		sc.Handler().ServeHTTP(&discardWriter{h: http.Header{}}, req)
	}()
	eventually(t, "the wait to park", func() bool { return sc.store.Waiting() == 1 })
	cancel()
	<-done
	if strings.Contains(buf.String(), "level=ERROR") {
		t.Errorf("a client that went away was logged as an error:\n%s", buf.String())
	}
	if !strings.Contains(buf.String(), "client went away") {
		t.Errorf("the cancelled wait is not in the debug log:\n%s", buf.String())
	}
}

// discardWriter is a ResponseWriter that keeps nothing.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}
