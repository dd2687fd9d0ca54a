package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/inflight"
)

func setBody(id int, key string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"state_set","arguments":{"key":%q,"value":{"n":%d}}}}`, id, key, id)
}

func TestShutdownFinishesRequestsInFlight(t *testing.T) {
	r := startHTTP(t, memConfig())
	addr := strings.TrimPrefix(r.URL, "http://")
	var calls []*inflight.Request
	for i := range 3 {
		calls = append(calls, inflight.Send(t, addr, setBody(i+1, fmt.Sprintf("inflight/%d", i)), wait))
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
		code, body := c.Finish(t)
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
	inflight.Send(t, ln.Addr().String(), setBody(1, "never-finished"), wait)
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
