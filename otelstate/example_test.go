package otelstate_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/otelstate"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A store whose backend calls are spans beneath the caller's span. The
// exporter here keeps spans in memory; a program would use an OTLP
// exporter (the sidecar does when OTEL_EXPORTER_OTLP_ENDPOINT is set).
func ExampleNewTracer() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())

	st, _ := state.New(memstate.New(), &state.Options{Tracer: otelstate.NewTracer(tp, nil), SweepInterval: -1})
	defer st.Close()

	ctx, span := tp.Tracer("my-agent").Start(context.Background(), "save plan")
	_, _ = st.Set(ctx, "plan/42", json.RawMessage(`{"steps":3}`))
	_, _ = st.Get(ctx, "plan/43")
	span.End()

	for _, s := range exp.GetSpans() {
		if !s.Parent.IsValid() {
			continue // the caller's own span
		}
		fmt.Print(s.Name)
		for _, kv := range s.Attributes {
			if kv.Key != "state.items" { // how many writes a commit applies
				fmt.Printf(" %s=%s", kv.Key, kv.Value.Emit())
			}
		}
		fmt.Println()
	}
	// Output:
	// state.commit db.system.name=memory db.operation.name=commit state.namespace=default state.outcome=ok
	// state.get db.system.name=memory db.operation.name=get state.namespace=default state.outcome=not_found
}
