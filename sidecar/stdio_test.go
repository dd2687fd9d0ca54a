package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// ServeStdio answers what it read before its input ended, writes nothing
// but JSON-RPC, and returns nil at the end of input.
func TestServeStdio(t *testing.T) {
	sc := newStdioSidecar(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- sc.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	lines := bufio.NewScanner(outR)
	recv := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("not JSON-RPC on stdout: %q", lines.Text())
		}
		return m
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":[1,2]}}}`)
	if m := recv(); m["id"] != 2.0 || m["result"].(map[string]any)["isError"] == true {
		t.Fatalf("state_set over stdio: %v", m)
	}
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("ServeStdio at the end of input: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return at the end of input")
	}
	if _, err := sc.Store().Get(t.Context(), "k"); err != nil {
		t.Errorf("the write is not in the store: %v", err)
	}
}

// mcp-go cancels every stdio call when its input ends; detach keeps a call
// running until the shutdown deadline (hardStop) instead.
func TestDetachOutlivesTransportCancellation(t *testing.T) {
	sc := newStdioSidecar(t)
	type key struct{}
	started, release, result := make(chan context.Context), make(chan struct{}), make(chan error)
	h := sc.detach(func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- ctx
		<-release
		return nil, ctx.Err()
	})
	transportCtx, cancelTransport := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	go func() {
		_, err := h(transportCtx, mcp.CallToolRequest{})
		result <- err
	}()
	ctx := <-started
	if ctx.Value(key{}) != "v" {
		t.Error("detach must keep the context's values")
	}
	cancelTransport()
	if ctx.Err() != nil {
		t.Fatal("the transport's cancellation reached a detached call")
	}
	sc.hardCancel() // the shutdown deadline passes
	select {
	case <-ctx.Done():
	case <-time.After(wait):
		t.Fatal("the shutdown deadline did not reach the detached call")
	}
	close(release)
	if err := <-result; err == nil {
		t.Error("a call cut off at the deadline must see its context cancelled")
	}
}

// newStdioSidecar returns a sidecar on memory configured for stdio, closed
// when the test ends.
func newStdioSidecar(t *testing.T) *Sidecar {
	t.Helper()
	cfg := memConfig()
	cfg.Transport = TransportStdio
	sc, err := New(t.Context(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Close() })
	return sc
}
