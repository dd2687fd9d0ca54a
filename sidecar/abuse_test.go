package sidecar

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowRequest opens a connection to addr and sends a POST to /mcp whose
// headers (plus extra header lines) declare a 4 KiB body, of which it sends
// 16 bytes. The connection is closed when the test ends.
func slowRequest(t *testing.T, addr, extra string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\n%sContent-Length: 4096\r\n\r\n{\"jsonrpc\":\"2.0\",", addr, extra); err != nil {
		t.Fatal(err)
	}
	return conn
}

// readResponse reads the HTTP response on conn, waiting at most wait.
func readResponse(t *testing.T, conn net.Conn) (int, *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, br
}

// response reads the HTTP response on conn and then reports whether the
// server closed the connection (a kept-alive one would make it wait).
func response(t *testing.T, conn net.Conn) (code int, closed bool) {
	t.Helper()
	code, br := readResponse(t, conn)
	_, err := br.ReadByte()
	return code, errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "connection reset") }

func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

// 300 connections that send a request's headers and then hold its body do
// not stop a valid client's calls or /healthz. (The body deadline is long
// here so that all 300 are certainly held during the calls;
// TestSlowBodiesAreCut checks the deadline.)
func TestSlowBodiesDoNotStopOthers(t *testing.T) {
	const slow = 300
	r := startHTTP(t, memConfig())
	addr := strings.TrimPrefix(r.URL, "http://")
	heap0, g0 := heapMiB(), runtime.NumGoroutine()
	for range slow {
		slowRequest(t, addr, "")
	}
	eventually(t, "300 requests held in their body", func() bool { return metric(t, r.URL, MetricHTTPInFlight) == slow })
	heldHeap, heldG := heapMiB(), runtime.NumGoroutine()

	c := connect(t, r.URL, false)
	for i := range 50 {
		call(t, c, "state_set", map[string]any{"key": fmt.Sprintf("k%d", i), "value": i})
		if got := call(t, c, "state_get", map[string]any{"key": fmt.Sprintf("k%d", i)}); got["found"] != true {
			t.Fatalf("state_get while 300 bodies are held: %v", got)
		}
	}
	if code, body := get(t, r.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz while 300 bodies are held: %d %s", code, body)
	}
	if code, _ := get(t, r.URL+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz while 300 bodies are held: %d", code)
	}
	if n := metric(t, r.URL, MetricHTTPInFlight); n < slow {
		t.Fatalf("only %v slow requests were still held after the calls", n)
	}
	t.Logf("%d slow bodies held: heap %.1f MiB -> %.1f MiB, goroutines %d -> %d (client and server in one process); 100 calls and /healthz answered meanwhile",
		slow, heap0, heldHeap, g0, heldG)
}

// A body that does not arrive within ReadTimeout is cut: 408, connection
// closed. So are headers that do not.
func TestSlowBodiesAreCut(t *testing.T) {
	cfg := memConfig()
	cfg.ReadTimeout = 500 * time.Millisecond
	r := startHTTP(t, cfg)
	addr := strings.TrimPrefix(r.URL, "http://")
	var conns []net.Conn
	for range 20 {
		conns = append(conns, slowRequest(t, addr, ""))
	}
	for i, conn := range conns {
		if code, closed := response(t, conn); code != http.StatusRequestTimeout || !closed {
			t.Errorf("slow body %d: %d, closed %v; want 408 and a closed connection", i, code, closed)
		}
	}
	eventually(t, "no request in flight", func() bool { return metric(t, r.URL, MetricHTTPInFlight) == 0 })

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\n", addr) // and never the end of the headers
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	if _, err := io.Copy(io.Discard, conn); err != nil && !isReset(err) {
		t.Errorf("slow headers: the connection must be closed, got %v", err)
	}
	call(t, connect(t, r.URL, false), "state_get", map[string]any{"key": "k"})
}

// Without a valid token a request is answered 401 from its headers, while
// its body is still on its way, and the connection is closed: an
// unauthenticated client cannot hold the server with a slow body.
func TestAuthenticationBeforeBody(t *testing.T) {
	cfg := memConfig() // a body deadline of minutes: a server that waited for the body would not answer
	cfg.Tokens = []Token{{Secret: "right", Namespace: ""}}
	r := startHTTP(t, cfg)
	addr := strings.TrimPrefix(r.URL, "http://")
	for _, hdr := range []string{"", "Authorization: Bearer wrong\r\n"} {
		before := metric(t, r.URL, MetricAuthFailures)
		conn := slowRequest(t, addr, hdr)
		if code, closed := response(t, conn); code != http.StatusUnauthorized || !closed {
			t.Errorf("%q: %d, closed %v; want 401 and a closed connection before the body", hdr, code, closed)
		}
		if after := metric(t, r.URL, MetricAuthFailures); after != before+1 {
			t.Errorf("auth failures went from %v to %v", before, after)
		}
	}
	// With the token, the request waits for its body.
	slowRequest(t, addr, "Authorization: Bearer right\r\n")
	eventually(t, "the authenticated request to wait for its body", func() bool { return metric(t, r.URL, MetricHTTPInFlight) == 1 })
}

// At most MaxConnections connections are open; another waits to be
// accepted until one closes.
func TestConnectionCap(t *testing.T) {
	cfg := memConfig()
	cfg.MaxConnections = 3
	r := startHTTP(t, cfg)
	addr := strings.TrimPrefix(r.URL, "http://")
	var held []net.Conn
	for range 3 {
		held = append(held, slowRequest(t, addr, ""))
	}
	eventually(t, "3 connections held", func() bool {
		// /metrics needs a connection too: read the gauge from the handler.
		return gathered(t, r.Metrics(), MetricHTTPInFlight) == 3
	})
	conn, err := net.Dial("tcp", addr) // the kernel accepts; the server does not yet
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("a 4th connection was served while 3 were open (MaxConnections 3)")
	}
	held[0].Close()
	if code, _ := readResponse(t, conn); code != http.StatusOK {
		t.Fatalf("the 4th connection once one closed: %d", code)
	}
}

// At most MaxConcurrentRequests requests are served at once; another waits
// for a slot until its deadline, then gets 503.
func TestConcurrencyCap(t *testing.T) {
	cfg, d := faultConfig(t)
	cfg.MaxConcurrentRequests = 2
	cfg.RequestTimeout = 300 * time.Millisecond
	r := startHTTP(t, cfg)
	release := d.hangGets() // a backend that ignores deadlines
	defer release()
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			resp := post(t, r.URL+"/mcp", nil, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"k"}}}`, i))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("a request that had a slot: %d", resp.StatusCode)
			}
		})
	}
	eventually(t, "2 requests stuck in the backend", func() bool { return d.hanging.Load() == 2 })
	resp := post(t, r.URL+"/mcp", nil, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a 3rd request while 2 of 2 slots are busy: %d, want 503 with Retry-After", resp.StatusCode)
	}
	if code, _ := get(t, r.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz is not capped: %d", code)
	}
	release()
	wg.Wait()
	call(t, connect(t, r.URL, false), "state_get", map[string]any{"key": "k"})
}

// gathered reads a gauge from the registry, without an HTTP request.
func gathered(t *testing.T, m *Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
