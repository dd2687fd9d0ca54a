package mcpadapter

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of a tool call's span. The MCP and GenAI names are those of
// OpenTelemetry's MCP semantic conventions (semantic-conventions-genai,
// docs/gen-ai/mcp.md); the state.* names are this package's own. A span
// never carries an argument or a result: keys, run ids, agent ids and values
// are the callers' data.
const (
	attrMethod    = attribute.Key("mcp.method.name")
	attrTool      = attribute.Key("gen_ai.tool.name")
	attrOperation = attribute.Key("gen_ai.operation.name")
	attrErrorType = attribute.Key("error.type")
	attrNamespace = attribute.Key("state.namespace")
	attrOutcome   = attribute.Key("state.outcome")
	attrErrorID   = attribute.Key("state.error_id")
	// attrUser is the authenticated caller (Caller.Principal), OpenTelemetry's
	// user.id; attrAccess its access level.
	attrUser   = attribute.Key("user.id")
	attrAccess = attribute.Key("state.access")
)

// instrumentation is the name of this package's tracer.
const instrumentation = "github.com/statesidecar/state/mcpadapter"

// tracing starts tool call spans; nil when Options.TracerProvider is nil,
// and then a tool call does nothing more than without it.
type tracing struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func newTracing(o *Options) *tracing {
	if o.TracerProvider == nil {
		return nil
	}
	prop := o.Propagator
	if prop == nil {
		prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	return &tracing{tracer: o.TracerProvider.Tracer(instrumentation, trace.WithInstrumentationVersion(state.Version)), prop: prop}
}

// start starts the span of a call of tool name on st. Its parent is the
// trace context in the request's params._meta when there is one (the MCP
// conventions' choice: one HTTP request may carry another trace, such as a
// gateway's), linked to the span context already in ctx (such as the HTTP
// request's traceparent); else the span context in ctx.
func (tr *tracing) start(ctx context.Context, st *state.Store, name string, req mcp.CallToolRequest) (context.Context, trace.Span) {
	ns, ok := NamespaceFrom(ctx)
	if !ok {
		ns = st.NamespaceName()
	}
	attrs := []attribute.KeyValue{attrMethod.String("tools/call"), attrTool.String(name),
		attrOperation.String("execute_tool"), attrNamespace.String(ns)}
	if c, ok := CallerFrom(ctx); ok {
		if c.Principal != "" {
			attrs = append(attrs, attrUser.String(c.Principal))
		}
		attrs = append(attrs, attrAccess.String(c.Access.String()))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...)}
	if m := req.Params.Meta; m != nil && len(m.AdditionalFields) > 0 {
		ambient := trace.SpanContextFromContext(ctx)
		ctx = tr.prop.Extract(ctx, metaCarrier(m.AdditionalFields))
		if sc := trace.SpanContextFromContext(ctx); ambient.IsValid() && !sc.Equal(ambient) {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: ambient}))
		}
	}
	return tr.tracer.Start(ctx, "tools/call "+name, opts...)
}

// end records how the call ended and ends span: outcome "ok", or the class
// of the tool error, which also sets error.type "tool_error" and the span's
// status (whose description is the class alone: the message may hold the
// caller's keys).
func (tr *tracing) end(span trace.Span, res *mcp.CallToolResult, outcome string) {
	if res != nil && res.IsError {
		span.SetAttributes(attrOutcome.String(outcome), attrErrorType.String("tool_error"))
		span.SetStatus(codes.Error, outcome)
	} else {
		span.SetAttributes(attrOutcome.String("ok"))
	}
	span.End()
}

// outcome is the class of a tool call's error, for its span: one word per
// kind of failure the tool's message explains.
func outcome(err error) string {
	var ae *argError
	switch {
	case errors.As(err, &ae), errors.Is(err, state.ErrInvalid):
		return "invalid_argument"
	case errors.Is(err, state.ErrNotFound):
		return "not_found"
	case errors.Is(err, state.ErrConflict):
		return "conflict"
	case errors.Is(err, state.ErrNotHeld):
		return "not_held"
	case errors.Is(err, state.ErrLeaseHeld), errors.Is(err, state.ErrClaimed):
		return "held"
	case errors.Is(err, state.ErrFinished):
		return "finished"
	case errors.Is(err, state.ErrClosed):
		return "closed"
	case errors.Is(err, errResetDisabled):
		return "reset_disabled"
	case errors.Is(err, ErrForbidden):
		return "forbidden"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "internal"
}

// metaCarrier reads trace context from a request's params._meta, whose keys
// traceparent, tracestate and baggage are unprefixed (SEP-414).
type metaCarrier map[string]any

// Get returns the string under key, or "".
func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set does nothing: the request is not changed.
func (m metaCarrier) Set(string, string) {}

// Keys returns the keys whose values are strings.
func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if _, ok := v.(string); ok {
			keys = append(keys, k)
		}
	}
	return keys
}
