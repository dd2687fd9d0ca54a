package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/mcpadapter"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Tool calls as OpenTelemetry spans: the caller's trace context travels in
// params._meta, and the tool's span continues that trace. The exporter here
// keeps spans in memory; the sidecar exports them by OTLP.
func ExampleOptions_tracing() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	c := exampleClient(ctx, mcpadapter.NewServer(exampleStore(), &mcpadapter.Options{TracerProvider: tp}))
	var req mcp.CallToolRequest
	req.Params.Name = "state_set"
	req.Params.Arguments = json.RawMessage(`{"key":"plan/42","value":{"steps":3}}`)
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	if _, err := c.CallTool(ctx, req); err != nil {
		fmt.Println(err)
	}

	s := exp.GetSpans()[0]
	fmt.Println(s.Name, s.SpanKind, "trace", s.SpanContext.TraceID(), "parent", s.Parent.SpanID())
	for _, kv := range s.Attributes {
		fmt.Printf("  %s=%s\n", kv.Key, kv.Value.Emit())
	}
	// Output:
	// tools/call state_set server trace 4bf92f3577b34da6a3ce929d0e0e4736 parent 00f067aa0ba902b7
	//   mcp.method.name=tools/call
	//   gen_ai.tool.name=state_set
	//   gen_ai.operation.name=execute_tool
	//   state.namespace=default
	//   state.outcome=ok
}
