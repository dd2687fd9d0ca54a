package sidecar

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/statesidecar/state/internal/spantest"
)

// TestTraceParentOverHTTP: an agent with a span of its own calls a tool over
// real HTTP, its MCP client putting the span's traceparent in the request
// headers; the sidecar's tool span is that span's child, and the backend
// calls are the tool span's children, in one trace.
func TestTraceParentOverHTTP(t *testing.T) {
	tp, exp := spantest.New(t)
	cfg := memConfig()
	cfg.TracerProvider = tp
	cfg.Tokens = []Token{{Secret: "tok-a", Namespace: "team-a"}}
	r := startHTTP(t, cfg)

	// The agent's own tracing: another provider, as in another process.
	agentTP, _ := spantest.New(t)
	prop := propagation.TraceContext{}
	c := connect(t, r.URL, false, transport.WithHTTPHeaderFunc(func(ctx context.Context) map[string]string {
		h := map[string]string{"Authorization": "Bearer tok-a"}
		carrier := propagation.MapCarrier{}
		prop.Inject(ctx, carrier)
		for k, v := range carrier {
			h[k] = v
		}
		return h
	}))
	ctx, agentSpan := agentTP.Tracer("agent").Start(t.Context(), "review step")
	var req mcp.CallToolRequest
	req.Params.Name = "state_set"
	req.Params.Arguments = map[string]any{"key": "plan/42", "value": map[string]any{"n": 1}}
	if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
		t.Fatalf("state_set: %v %v", err, res)
	}
	agentSpan.End()

	tool := spantest.Named(t, exp, "tools/call state_set")
	if tool.SpanContext.TraceID() != agentSpan.SpanContext().TraceID() || tool.Parent.SpanID() != agentSpan.SpanContext().SpanID() || !tool.Parent.IsRemote() {
		t.Fatalf("tool span: trace %s parent %s, want the agent's trace %s and span %s (remote)",
			tool.SpanContext.TraceID(), tool.Parent.SpanID(), agentSpan.SpanContext().TraceID(), agentSpan.SpanContext().SpanID())
	}
	backendSpans := 0
	for _, s := range exp.GetSpans() {
		if !strings.HasPrefix(s.Name, "state.") {
			continue
		}
		backendSpans++
		if s.Parent.SpanID() != tool.SpanContext.SpanID() {
			t.Errorf("backend span %s is not the tool span's child", s.Name)
		}
		for _, kv := range s.Attributes {
			if kv.Key == "state.namespace" && kv.Value.AsString() != "team-a" {
				t.Errorf("backend span %s in namespace %s, want the token's team-a", s.Name, kv.Value.AsString())
			}
		}
	}
	if backendSpans == 0 {
		t.Error("no backend span under the tool span")
	}

	// _meta wins over the header, which becomes a link.
	exp.Reset()
	const metaTrace, metaSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	ctx, agentSpan = agentTP.Tracer("agent").Start(t.Context(), "another step")
	req.Params.Name, req.Params.Arguments = "state_get", map[string]any{"key": "plan/42"}
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{"traceparent": "00-" + metaTrace + "-" + metaSpan + "-01"}}
	if res, err := c.CallTool(ctx, req); err != nil || res.IsError {
		t.Fatalf("state_get: %v %v", err, res)
	}
	agentSpan.End()
	tool = spantest.Named(t, exp, "tools/call state_get")
	if tool.SpanContext.TraceID().String() != metaTrace || tool.Parent.SpanID().String() != metaSpan {
		t.Errorf("with _meta: tool span trace %s parent %s, want %s and %s", tool.SpanContext.TraceID(), tool.Parent.SpanID(), metaTrace, metaSpan)
	}
	if len(tool.Links) != 1 || tool.Links[0].SpanContext.SpanID() != agentSpan.SpanContext().SpanID() {
		t.Errorf("with _meta: links %v, want the header's span %s", tool.Links, agentSpan.SpanContext().SpanID())
	}
}

// TestNoTracingNoSpans: without Config.TracerProvider nothing is traced,
// not even through OpenTelemetry's global provider (which a program may have
// set for itself), and a traceparent header changes nothing.
func TestNoTracingNoSpans(t *testing.T) {
	tp, exp := spantest.New(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	defer otel.SetTracerProvider(prev)

	r := startHTTP(t, memConfig())
	c := connect(t, r.URL, false, transport.WithHTTPHeaders(map[string]string{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}))
	call(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	call(t, c, "state_get", map[string]any{"key": "k"})
	if spans := exp.GetSpans(); len(spans) != 0 {
		t.Errorf("%d spans without tracing configured, want 0: %v", len(spans), spans)
	}
}

// TestTracingFromEnv: traces are exported only when the OTEL_* variables
// ask for them, by the protocol they name.
func TestTracingFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		on    bool
		where string
		err   string
	}{
		{env: nil},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true, where: "OTLP http/protobuf to http://collector:4318"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, on: true, where: "to http://collector:4318/v1/traces"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, where: "OTLP grpc"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, on: true, where: "OTLP grpc"},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, where: "the default endpoint"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	} {
		lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
		tp, where, err := tracingFromEnv(t.Context(), lookup)
		switch {
		case tc.err != "":
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want a configuration error naming %s", tc.env, err, tc.err)
			}
		case err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case (tp != nil) != tc.on:
			t.Errorf("%v: tracing on = %v, want %v", tc.env, tp != nil, tc.on)
		case tc.on && !strings.Contains(where, tc.where):
			t.Errorf("%v: exports %q, want it to say %q", tc.env, where, tc.where)
		}
		if tp != nil {
			_ = tp.Shutdown(t.Context())
		}
	}
	var _ trace.TracerProvider = (*sdktrace.TracerProvider)(nil)
}
