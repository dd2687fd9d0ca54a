package sidecar

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
)

const legacyInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`

// initialize posts a legacy initialize and returns the status and the
// session id issued.
func initialize(t testing.TB, client *http.Client, mcpURL string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(legacyInit))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

// A stateful server keeps at most MaxSessions sessions: an initialize
// beyond them gets 503 until one ends (DELETE) or is idle too long.
func TestSessionCap(t *testing.T) {
	cfg := memConfig()
	cfg.Stateful, cfg.MaxSessions = true, 20
	r := startHTTP(t, cfg)
	var ids []string
	refused := 0
	for range 100 {
		code, id := initialize(t, http.DefaultClient, r.URL+"/mcp")
		switch code {
		case http.StatusOK:
			ids = append(ids, id)
		case http.StatusServiceUnavailable:
			refused++
		default:
			t.Fatalf("initialize: %d", code)
		}
	}
	if len(ids) != 20 || refused != 80 || metric(t, r.URL, MetricSessions) != 20 {
		t.Fatalf("100 initializes with MaxSessions 20: %d sessions, %d refused, gauge %v", len(ids), refused, metric(t, r.URL, MetricSessions))
	}
	req, _ := http.NewRequest(http.MethodDelete, r.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE a session: %v %v", err, resp)
	}
	if code, _ := initialize(t, http.DefaultClient, r.URL+"/mcp"); code != http.StatusOK {
		t.Errorf("initialize after a session ended: %d", code)
	}
	// Modern clients have no sessions and are never refused.
	call(t, connect(t, r.URL, false), "state_get", map[string]any{"key": "k"})
}

// Idle sessions end after SessionIdleTimeout, and their ids are forgotten.
func TestIdleSessionsEnd(t *testing.T) {
	cfg := memConfig()
	cfg.Stateful, cfg.SessionIdleTimeout = true, time.Second
	r := startHTTP(t, cfg)
	for range 10 {
		initialize(t, http.DefaultClient, r.URL+"/mcp")
	}
	if n := metric(t, r.URL, MetricSessions); n != 10 {
		t.Fatalf("%v sessions, want 10", n)
	}
	eventually(t, "idle sessions to end", func() bool { return metric(t, r.URL, MetricSessions) == 0 })
}

// TestSessionFloodMemory measures the heap under a flood of initialize
// calls (STATE_TEST_SESSION_FLOOD of them, e.g. 60000) against the sidecar
// and, for comparison, against mcp-go's own stateful server as the sidecar
// used it before. It asserts only that the sidecar's sessions stay within
// MaxSessions; the memory figures are logged (go test -v).
func TestSessionFloodMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STATE_TEST_SESSION_FLOOD"))
	if n <= 0 {
		t.Skip("set STATE_TEST_SESSION_FLOOD=60000 to measure memory under a flood of initialize calls")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	flood := func(mcpURL string) (ok, refused int, grew float64) {
		before := heapMiB()
		for range n {
			switch code, _ := initialize(t, client, mcpURL); code {
			case http.StatusOK:
				ok++
			case http.StatusServiceUnavailable:
				refused++
			default:
				t.Fatalf("initialize: %d", code)
			}
		}
		return ok, refused, heapMiB() - before
	}

	cfg := memConfig()
	cfg.Stateful = true // defaults: MaxSessions 1000, idle timeout 5 minutes
	r := startHTTP(t, cfg)
	ok, refused, grew := flood(r.URL + "/mcp")
	if live := r.sessions.count(); live > cfg.MaxSessions {
		t.Errorf("%d live sessions, over MaxSessions %d", live, cfg.MaxSessions)
	}
	t.Logf("sidecar: %d initializes: %d sessions, %d refused (503); heap grew %.1f MiB", n, ok, refused, grew)

	s := mcpadapter.NewServer(r.Store(), nil)
	bare := server.NewStreamableHTTPServer(s, server.WithStateful(true), server.WithSessionIdleTTL(time.Hour))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: bare}
	go srv.Serve(ln)
	defer srv.Close()
	defer bare.Shutdown(t.Context())
	ok, refused, grew = flood(fmt.Sprintf("http://%s/mcp", ln.Addr()))
	t.Logf("mcp-go's stateful server, as the sidecar used it before: %d initializes: %d sessions, %d refused; heap grew %.1f MiB", n, ok, refused, grew)
}
