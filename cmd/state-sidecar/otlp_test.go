package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// collector is a fake OpenTelemetry collector: it keeps the spans the
// sidecar exports, by OTLP over HTTP (protobuf) or gRPC.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
}

func (c *collector) add(req *coltrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				c.service = append(c.service, a.GetValue().GetStringValue())
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
}

// Export is the gRPC service.
func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is the OTLP/HTTP endpoint, POST /v1/traces.
func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.add(&req)
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// TestOTLPExport runs the binary with the standard OTEL_* variables pointing
// at a fake collector, over each OTLP protocol; a tool call carrying a
// traceparent header is exported, after SIGTERM flushed it, as a span of
// that trace with its backend calls beneath it, from service state-sidecar.
func TestOTLPExport(t *testing.T) {
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(strings.ReplaceAll(protocol, "/", "-"), func(t *testing.T) {
			col := &collector{}
			var endpoint string
			if protocol == "grpc" {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := grpc.NewServer()
				coltrace.RegisterTraceServiceServer(srv, col)
				go func() { _ = srv.Serve(ln) }()
				defer srv.Stop()
				endpoint = "http://" + ln.Addr().String()
			} else {
				srv := httptest.NewServer(col)
				defer srv.Close()
				endpoint = srv.URL
			}
			p, url := startHTTP(t, "STATE_BACKEND=memory", "OTEL_EXPORTER_OTLP_ENDPOINT="+endpoint,
				"OTEL_EXPORTER_OTLP_PROTOCOL="+protocol, "OTEL_EXPORTER_OTLP_INSECURE=true")
			if p.logLine(t, "tracing on")["export"] == nil {
				t.Fatal("the sidecar did not log where it exports traces")
			}
			const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/mcp", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok":true`) {
				t.Fatalf("state_set: %d %s", resp.StatusCode, body)
			}
			p.signal(t, syscall.SIGTERM) // the exporter flushes at shutdown
			if code := p.exitCode(t); code != 0 {
				t.Fatalf("exit status %d after SIGTERM", code)
			}

			col.mu.Lock()
			defer col.mu.Unlock()
			var tool *tracepb.Span
			for _, s := range col.spans {
				if s.GetName() == "tools/call state_set" {
					tool = s
				}
			}
			if tool == nil {
				t.Fatalf("the collector got %d spans, none tools/call state_set; sidecar log:\n%s", len(col.spans), p.stderr.String())
			}
			if hexOf(tool.GetTraceId()) != traceID || hexOf(tool.GetParentSpanId()) != parentID {
				t.Errorf("tool span trace %s parent %s, want %s and %s from the traceparent header",
					hexOf(tool.GetTraceId()), hexOf(tool.GetParentSpanId()), traceID, parentID)
			}
			children := 0
			for _, s := range col.spans {
				if strings.HasPrefix(s.GetName(), "state.") && string(s.GetParentSpanId()) == string(tool.GetSpanId()) {
					children++
				}
			}
			if children == 0 {
				t.Error("no backend span beneath the tool span")
			}
			if len(col.service) == 0 || col.service[0] != "state-sidecar" {
				t.Errorf("service.name %v, want state-sidecar", col.service)
			}
		})
	}
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
