package sidecar

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// halfSent is an HTTP request to /mcp whose body has been sent only in part,
// so that the server holds it in flight for as long as the test wants.
type halfSent struct {
	conn net.Conn
	rest string
}

func sendHalf(t *testing.T, addr, body string) *halfSent {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cut := len(body) / 2
	_, err = fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:cut])
	if err != nil {
		t.Fatal(err)
	}
	return &halfSent{conn: conn, rest: body[cut:]}
}

// finish sends the rest of the body and returns the response status and body.
func (h *halfSent) finish(t *testing.T) (int, string) {
	t.Helper()
	if _, err := io.WriteString(h.conn, h.rest); err != nil {
		t.Fatal(err)
	}
	_ = h.conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(h.conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func setBody(id int, key string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"state_set","arguments":{"key":%q,"value":{"n":%d}}}}`, id, key, id)
}

func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	r := startHTTP(t, memConfig())
	addr := strings.TrimPrefix(r.URL, "http://")
	var calls []*halfSent
	for i := range 3 {
		calls = append(calls, sendHalf(t, addr, setBody(i+1, fmt.Sprintf("inflight/%d", i))))
	}
	eventually(t, "three requests in flight", func() bool { return metric(t, r.URL, MetricHTTPInFlight) == 3 })

	r.stop() // what SIGTERM does in Run
	eventually(t, "the listener to close", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("/readyz while draining: %d, want 503", rec.Code)
	}

	for i, c := range calls {
		code, body := c.finish(t)
		if code != http.StatusOK || !strings.Contains(body, `\"ok\":true`) {
			t.Errorf("call %d in flight at shutdown: %d %s", i, code, body)
		}
	}
	if err := r.shutdown(); err != nil {
		t.Fatalf("Serve after a clean drain: %v", err)
	}
	for i := range calls {
		if _, err := r.Store().Get(t.Context(), fmt.Sprintf("inflight/%d", i)); err != nil {
			t.Errorf("the write of call %d is not in the store: %v", i, err)
		}
	}
}

func TestShutdownDeadline(t *testing.T) {
	cfg := memConfig()
	cfg.ShutdownTimeout = 50 * time.Millisecond
	sc, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sc.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	sendHalf(t, ln.Addr().String(), setBody(1, "never-finished"))
	eventually(t, "a request in flight", func() bool { return metric(t, base, MetricHTTPInFlight) == 1 })
	cancel()
	select {
	case err := <-served:
		if !errors.Is(err, ErrShutdownTimeout) {
			t.Fatalf("Serve with a request stuck past the deadline: %v, want ErrShutdownTimeout", err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return after its shutdown deadline")
	}
}
