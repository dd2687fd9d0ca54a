package mcpadapter_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/otelstate"
	"github.com/statesidecar/state/statetest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/statesidecar/state/internal/spantest"
)

// tracedClient returns a client of tools traced into an in-memory exporter,
// over st (whose backend calls are traced too when st has a Tracer).
func tracedClient(t *testing.T, st *state.Store, tp *sdktrace.TracerProvider, log *slog.Logger) *mcpc {
	t.Helper()
	return connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{TracerProvider: tp, Logger: log}))
}

func spanAttrs(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.Emit()
	}
	return m
}

func TestToolCallSpanFollowsTheMCPConventionsAndCarriesNoData(t *testing.T) {
	tp, exp := spantest.New(t)
	st, err := state.New(memstate.New(), &state.Options{Tracer: otelstate.NewTracer(tp, nil), Clock: statetest.NewClock(), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := tracedClient(t, st, tp, nil)

	ctx := mcpadapter.WithNamespace(t.Context(), "team-a")
	c.okCtx(ctx, "state_set", `{"key":"customer/alice","value":{"card":"4111"},"agent_id":"agent-secret"}`)
	s := spantest.Named(t, exp, "tools/call state_set")
	a := spanAttrs(s)
	want := map[attribute.Key]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "state_set",
		"gen_ai.operation.name": "execute_tool", "state.namespace": "team-a", "state.outcome": "ok"}
	for k, v := range want {
		if a[k] != v {
			t.Errorf("tool span attribute %s = %q, want %q (all: %v)", k, a[k], v, a)
		}
	}
	if s.SpanKind != trace.SpanKindServer || s.Status.Code == codes.Error {
		t.Errorf("tool span kind %v status %v, want server and not an error", s.SpanKind, s.Status)
	}
	if s.Parent.IsValid() {
		t.Errorf("tool span has parent %v without any trace context given", s.Parent)
	}
	commit := spantest.Named(t, exp, "state.commit")
	if commit.Parent.SpanID() != s.SpanContext.SpanID() || spanAttrs(commit)["state.namespace"] != "team-a" {
		t.Errorf("the backend's commit span is not the tool span's child in namespace team-a: parent %v, attributes %v",
			commit.Parent.SpanID(), commit.Attributes)
	}
	for _, sp := range exp.GetSpans() {
		for _, kv := range sp.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "alice") || strings.Contains(v, "4111") || strings.Contains(v, "agent-secret") {
				t.Errorf("span %s attribute %s = %q carries an argument", sp.Name, kv.Key, v)
			}
		}
	}
}

func TestToolCallSpanParentComesFromMeta(t *testing.T) {
	tp, exp := spantest.New(t)
	st, _ := statetest.NewStore(t)
	c := tracedClient(t, st, tp, nil)

	// The caller's context already has a span (as the HTTP request's
	// traceparent would give it); _meta names another, which wins, and
	// the first becomes a link.
	ambient, ambientSpan := tp.Tracer("http").Start(t.Context(), "POST /mcp")
	defer ambientSpan.End()
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var req mcp.CallToolRequest
	req.Params.Name = "state_get"
	req.Params.Arguments = json.RawMessage(`{"key":"k"}`)
	req.Params.Meta = &mcp.Meta{AdditionalFields: map[string]any{
		"traceparent": "00-" + traceID + "-" + spanID + "-01",
		"tracestate":  "rojo=00f067aa0ba902b7",
	}}
	if _, err := c.c.CallTool(ambient, req); err != nil {
		t.Fatal(err)
	}
	s := spantest.Named(t, exp, "tools/call state_get")
	if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != spanID || !s.Parent.IsRemote() {
		t.Errorf("tool span trace %s parent %s (remote %v), want trace %s parent %s from _meta",
			s.SpanContext.TraceID(), s.Parent.SpanID(), s.Parent.IsRemote(), traceID, spanID)
	}
	if s.SpanContext.TraceState().Get("rojo") != "00f067aa0ba902b7" {
		t.Errorf("tracestate %q not carried from _meta", s.SpanContext.TraceState())
	}
	if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != ambientSpan.SpanContext().SpanID() {
		t.Errorf("tool span links %v, want one to the ambient span %s", s.Links, ambientSpan.SpanContext().SpanID())
	}

	// Without _meta the span in the context is the parent, with no link.
	exp.Reset()
	c.okCtx(ambient, "state_get", `{"key":"k"}`)
	s = spantest.Named(t, exp, "tools/call state_get")
	if s.Parent.SpanID() != ambientSpan.SpanContext().SpanID() || len(s.Links) != 0 {
		t.Errorf("without _meta: parent %s links %v, want the ambient span %s and no link",
			s.Parent.SpanID(), s.Links, ambientSpan.SpanContext().SpanID())
	}
}

func TestToolErrorSpanNamesTheKindAndTheErrorID(t *testing.T) {
	tp, exp := spantest.New(t)
	var logs bytes.Buffer
	st, d := faultyStore(t)
	c := tracedClient(t, st, tp, slog.New(slog.NewJSONHandler(&logs, nil)))

	for _, tc := range []struct{ tool, args, outcome string }{
		{"workflow_status", `{"run_id":"wf-0123456789ab"}`, "not_found"},
		{"state_set", `{"key":"","value":1}`, "invalid_argument"},
		{"state_set", `{"key":"k","value":1,"if_version":7}`, "conflict"},
		{"sidecar_reset", `{}`, "reset_disabled"},
	} {
		exp.Reset()
		c.fail(tc.tool, tc.args)
		s := spantest.Named(t, exp, "tools/call "+tc.tool)
		a := spanAttrs(s)
		if a["state.outcome"] != tc.outcome || a["error.type"] != "tool_error" || s.Status.Code != codes.Error || s.Status.Description != tc.outcome {
			t.Errorf("%s(%s): outcome %q error.type %q status %v, want %q, tool_error and an error status naming it",
				tc.tool, tc.args, a["state.outcome"], a["error.type"], s.Status, tc.outcome)
		}
	}

	exp.Reset()
	d.down.Store(true)
	text := c.fail("state_get", `{"key":"k"}`)
	s := spantest.Named(t, exp, "tools/call state_get")
	a := spanAttrs(s)
	id := a["state.error_id"]
	if a["state.outcome"] != "internal" || id == "" || !strings.Contains(text, id) {
		t.Errorf("backend failure: outcome %q error id %q, want internal and the id the client saw in %q", a["state.outcome"], id, text)
	}
	if strings.Contains(s.Status.Description, "10.0.0.9") {
		t.Errorf("the span's status carries the driver's text: %q", s.Status.Description)
	}
	if !strings.Contains(logs.String(), `"trace_id":"`+s.SpanContext.TraceID().String()+`"`) {
		t.Errorf("the log line of error %s does not name trace %s:\n%s", id, s.SpanContext.TraceID(), logs.String())
	}
}

func TestNoTracerProviderNoSpans(t *testing.T) {
	tp, exp := spantest.New(t)
	st, _ := statetest.NewStore(t)
	c := connect(t, mcpadapter.NewServer(st, nil))
	ctx, span := tp.Tracer("caller").Start(t.Context(), "caller")
	c.okCtx(ctx, "state_set", `{"key":"k","value":1}`)
	span.End()
	if spans := exp.GetSpans(); len(spans) != 1 {
		t.Errorf("%d spans without a TracerProvider, want only the caller's", len(spans))
	}
}

func TestToolCallSpanNamesTheCaller(t *testing.T) {
	tp, exp := spantest.New(t)
	st, _ := statetest.NewStore(t)
	c := tracedClient(t, st, tp, nil)
	ctx := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "alice@example.com", Access: mcpadapter.AccessRead})
	c.callCtx(ctx, "state_set", `{"key":"k","value":1}`)
	a := spanAttrs(spantest.Named(t, exp, "tools/call state_set"))
	if a["user.id"] != "alice@example.com" || a["state.access"] != "read" || a["state.outcome"] != "forbidden" {
		t.Fatalf("span attributes %v: want user.id, state.access read and outcome forbidden", a)
	}
}
