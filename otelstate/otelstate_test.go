package otelstate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/otelstate"
	"github.com/statesidecar/state/statetest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/statesidecar/state/internal/spantest"
)

// tracedStore returns a memory store traced by otelstate into an in-memory
// exporter.
func tracedStore(t *testing.T, opts *otelstate.Options) (*state.Store, *tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	tp, exp := spantest.New(t)
	st, err := state.New(memstate.New(), &state.Options{Tracer: otelstate.NewTracer(tp, opts),
		Clock: statetest.NewClock(), SweepInterval: -1, Namespace: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, exp, tp.Tracer("test")
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func TestSpansAreChildrenWithSafeAttributes(t *testing.T) {
	st, exp, tracer := tracedStore(t, nil)
	ctx, parent := tracer.Start(context.Background(), "tools/call state_set")
	if _, err := st.Set(ctx, "customer/alice@example.com", json.RawMessage(`{"card":"4111"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "customer/bob@example.com"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if _, err := st.Set(ctx, "customer/alice@example.com", json.RawMessage(`2`), state.IfVersion(999999)); !errors.Is(err, state.ErrConflict) {
		t.Fatalf("Set with a wrong version: %v", err)
	}
	parent.End()

	spans := exp.GetSpans()
	outcomes := map[string]bool{}
	for _, s := range spans {
		if s.Name == "tools/call state_set" {
			continue
		}
		if !strings.HasPrefix(s.Name, "state.") {
			t.Errorf("span %q: want a state.<op> name", s.Name)
		}
		if s.Parent.SpanID() != parent.SpanContext().SpanID() || s.SpanContext.TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %s is not a child of the caller's span", s.Name)
		}
		if s.SpanKind != trace.SpanKindClient {
			t.Errorf("span %s has kind %v, want client", s.Name, s.SpanKind)
		}
		a := attrs(s)
		if a["db.system.name"].AsString() != "memory" || a["state.namespace"].AsString() != "team-a" ||
			a["db.operation.name"].AsString() != strings.TrimPrefix(s.Name, "state.") {
			t.Errorf("span %s attributes %v", s.Name, s.Attributes)
		}
		outcomes[a["state.outcome"].AsString()] = true
		for _, kv := range s.Attributes {
			if v := kv.Value.Emit(); strings.Contains(v, "alice") || strings.Contains(v, "bob") || strings.Contains(v, "4111") {
				t.Errorf("span %s attribute %s = %q carries a key or a value", s.Name, kv.Key, v)
			}
		}
		if s.Status.Code == codes.Error {
			t.Errorf("span %s has an error status for an answer (%v)", s.Name, a["state.outcome"])
		}
	}
	for _, o := range []string{"ok", "not_found", "condition_failed"} {
		if !outcomes[o] {
			t.Errorf("no span with state.outcome %q; outcomes %v", o, outcomes)
		}
	}
}

func TestNoSpanWithoutAParentUnlessRootSpans(t *testing.T) {
	st, exp, _ := tracedStore(t, nil)
	if _, err := st.Set(context.Background(), "k", json.RawMessage(`1`)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans for calls outside any span, want 0", n)
	}

	st, exp, _ = tracedStore(t, &otelstate.Options{RootSpans: true})
	if _, err := st.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) == 0 || spans[0].Name != "state.sweep" || spans[0].Parent.IsValid() {
		t.Errorf("RootSpans: spans %v, want a root state.sweep", spans)
	}
}

// failingDriver fails every Get with an error naming the backend's
// address, as a driver's error may.
type failingDriver struct{ *memstate.Driver }

func (failingDriver) Get(context.Context, string, string, time.Time) (backend.Record, error) {
	return backend.Record{}, errors.New("dial tcp 10.0.0.7:6379: connection refused")
}

func TestFailureIsAClassNotATextAndCancellationIsNamed(t *testing.T) {
	tp, exp := spantest.New(t)
	st, err := state.New(failingDriver{memstate.New()}, &state.Options{Tracer: otelstate.NewTracer(tp, nil), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	if _, err := st.Get(ctx, "k"); err == nil {
		t.Fatal("Get on a failing driver succeeded")
	}
	parent.End()
	var get tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "state.get" {
			get = s
		}
	}
	a := attrs(get)
	if get.Status.Code != codes.Error || a["state.outcome"].AsString() != "error" || a["error.type"].AsString() != "_OTHER" {
		t.Errorf("failed get: status %v, attributes %v", get.Status, get.Attributes)
	}
	if strings.Contains(get.Status.Description, "10.0.0.7") || len(get.Events) > 0 {
		t.Errorf("failed get: the span carries the driver's text: %q %v", get.Status.Description, get.Events)
	}

	exp.Reset()
	st2, _ := state.New(memstate.New(), &state.Options{Tracer: otelstate.NewTracer(tp, nil), SweepInterval: -1})
	defer st2.Close()
	ctx, parent = tp.Tracer("test").Start(context.Background(), "parent")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _ = st2.Set(cctx, "k", json.RawMessage(`1`))
	parent.End()
	cancelled := 0
	for _, s := range exp.GetSpans() {
		if s.Name == "parent" {
			continue
		}
		cancelled++
		if attrs(s)["error.type"].AsString() != "canceled" {
			t.Errorf("span %s of a cancelled call: attributes %v, want error.type canceled", s.Name, s.Attributes)
		}
	}
	if cancelled == 0 {
		t.Error("no span for the cancelled call")
	}
}
