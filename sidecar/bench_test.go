package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkToolCall measures the server side of one MCP tool call over the
// sidecar's HTTP handler (no network: the client's cost is left out), as
// examples/loadgen's workload sends it: state_set and state_get alternating,
// each goroutine on its own keys, with a modern client's headers. "echo" is
// a bare mcp-go server whose two tools return their arguments: the MCP path
// alone, the yardstick of the ratio.
//
// Compare them taking turns, on a busy machine:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench 'ToolCall' -benchtime 20000x ./sidecar; done
func BenchmarkToolCall(b *testing.B) {
	b.Run("echo", func(b *testing.B) { benchToolCalls(b, echoHandler(), nil) })
	for _, backend := range []string{BackendMemory, BackendSQLite} {
		b.Run(backend, func(b *testing.B) {
			cfg := Defaults()
			cfg.Backend, cfg.DBPath = backend, filepath.Join(b.TempDir(), "bench.db")
			sc, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			benchToolCalls(b, sc.Handler(), nil)
		})
	}
}

// BenchmarkTracing measures what tracing costs a tool call on the memory
// backend (where it weighs most): "off" has no tracer provider, the
// default; "on" samples every call, a tool span and its backend spans,
// through the SDK's batching processor into an exporter that drops them
// (export happens on another goroutine, off the call's path);
// "unsampled" has a provider whose sampler records nothing. Every request
// carries a traceparent header. Compare them taking turns:
//
//	for i in 1 2 3 4 5; do go test -run '^$' -bench 'Tracing' -benchtime 20000x ./sidecar; done
func BenchmarkTracing(b *testing.B) {
	header := map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	for _, mode := range []string{"off", "on", "unsampled"} {
		b.Run(mode, func(b *testing.B) {
			cfg := Defaults()
			cfg.Backend = BackendMemory
			switch mode {
			case "on":
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				cfg.TracerProvider = tp
			case "unsampled":
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
				defer tp.Shutdown(context.Background())
				cfg.TracerProvider = tp
			}
			sc, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			benchToolCalls(b, sc.Handler(), header)
		})
	}
}

// echoHandler is the bare mcp-go server of examples/loadgen's echo.
func echoHandler() http.Handler {
	s := server.NewMCPServer("echo", "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
	}
	for _, name := range []string{"state_set", "state_get"} {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription("echo the arguments"),
			mcp.WithString("key", mcp.Required()), mcp.WithObject("value")), echo)
	}
	return server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true))
}

func benchToolCalls(b *testing.B, h http.Handler, header map[string]string) {
	var worker atomic.Int64
	b.SetParallelism(32) // 64 goroutines on 2 CPUs, as loadgen's 64 clients
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	defer func() {
		// CPU time per call of the whole process: unlike ns/op, it hardly
		// moves with other processes' load.
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		w := worker.Add(1)
		for n := 0; pb.Next(); n++ {
			key := fmt.Sprintf("bench/w%d/k%d", w, (n/2)%64)
			name, args := "state_get", `{"key":"`+key+`"}`
			if n%2 == 0 {
				name, args = "state_set", `{"key":"`+key+`","value":{"n":`+fmt.Sprint(n)+`,"note":"loadgen"}}`
			}
			body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},` +
				`"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"arguments":` + args + `,"name":"` + name + `"}}`
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", name)
			for k, v := range header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `"isError":true`) {
				b.Fatalf("%s: %d %s", name, rec.Code, rec.Body.String())
			}
		}
	})
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
