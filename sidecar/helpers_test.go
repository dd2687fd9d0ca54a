package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/statesidecar/state/internal/syncbuf"
)

// wait bounds every real wait in these tests: generous, because the machine
// may be busy; a wait that ends early is never a failure.
const wait = 2 * time.Minute

func testLogger(t *testing.T) *slog.Logger {
	var buf syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sidecar log:\n%s", buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// memConfig is a memory-backed HTTP configuration on a free loopback port.
func memConfig() Config {
	c := Defaults()
	c.Backend, c.Port, c.ShutdownTimeout = BackendMemory, 0, wait
	c.ReadTimeout = wait // the shutdown tests hold requests with half a body
	return c
}

// running is a sidecar serving HTTP on a loopback listener.
type running struct {
	*Sidecar
	URL    string // base URL, without /mcp
	stop   context.CancelFunc
	served chan error
}

// shutdown stops serving and returns Serve's result (once).
func (r *running) shutdown() error {
	r.stop()
	select {
	case err := <-r.served:
		r.served <- err
		return err
	case <-time.After(wait + time.Minute):
		return errors.New("Serve did not return")
	}
}

// startHTTP serves cfg on a loopback listener until the test ends.
func startHTTP(t *testing.T, cfg Config) *running {
	t.Helper()
	sc, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Sidecar: sc, URL: "http://" + ln.Addr().String(), stop: cancel, served: make(chan error, 1)}
	go func() { r.served <- sc.Serve(ctx, ln) }()
	t.Cleanup(func() {
		if err := r.shutdown(); err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := sc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// connect starts and initializes an MCP client over Streamable HTTP at
// baseURL+"/mcp". legacy pins protocol 2025-11-25 (initialize handshake and,
// with a stateful server, sessions); otherwise the client negotiates the
// newest protocol.
func connect(t *testing.T, baseURL string, legacy bool, opts ...transport.StreamableHTTPCOption) *client.Client {
	t.Helper()
	c, err := dial(t, baseURL, legacy, opts...)
	if err != nil {
		t.Fatalf("connecting to %s (legacy=%v): %v", baseURL, legacy, err)
	}
	return c
}

func dial(t *testing.T, baseURL string, legacy bool, opts ...transport.StreamableHTTPCOption) (*client.Client, error) {
	t.Helper()
	opts = append([]transport.StreamableHTTPCOption{transport.WithHTTPLogger(slog.New(slog.DiscardHandler))}, opts...)
	var c *client.Client
	if legacy {
		tr, err := transport.NewStreamableHTTP(baseURL+"/mcp", opts...)
		if err != nil {
			return nil, err
		}
		c = client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125))
	} else {
		var err error
		if c, err = client.NewStreamableHttpClient(baseURL+"/mcp", opts...); err != nil {
			return nil, err
		}
	}
	t.Cleanup(func() { _ = c.Close() })
	// Start's context lives as long as the client: a GET stream runs on it.
	if err := c.Start(t.Context()); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		return nil, err
	}
	return c, nil
}

// callRaw calls a tool and returns its result, failing on a protocol error.
func callRaw(t *testing.T, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s(%v): %v", tool, args, err)
	}
	return res
}

// call calls a tool that must succeed and returns its structured result,
// decoded with json.Number so that big integers keep every digit.
func call(t *testing.T, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	m, err := tryCall(t.Context(), c, tool, args)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryCall is call for other goroutines than the test's: it returns an error
// for a protocol error or a tool error.
func tryCall(ctx context.Context, c *client.Client, tool string, args map[string]any) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("%s(%v): %w", tool, args, err)
	}
	if res.IsError {
		return nil, fmt.Errorf("%s(%v): tool error: %s", tool, args, text(res))
	}
	raw := []byte(res.RawStructuredContent)
	if len(raw) == 0 {
		raw = []byte(text(res))
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: result %s: %w", tool, raw, err)
	}
	return m, nil
}

// callErr calls a tool that must fail with a tool error and returns its text.
func callErr(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	res := callRaw(t, c, tool, args)
	if !res.IsError {
		t.Fatalf("%s(%v): want a tool error, got %s", tool, args, text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func toolNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	res, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// get does an HTTP GET and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond until it holds or the wait ends.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
