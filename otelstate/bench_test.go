package otelstate_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/otelstate"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkGet measures what a backend call's span adds to the cheapest
// call there is, a Get on the memory backend: "off" has no Tracer (the
// default), "no-parent" has one but the call runs outside any span (as a
// sweep or a probe does: no span), "on" runs inside a sampled span and gets
// a span of its own, batched to an exporter that drops it. Compare them
// taking turns:
//
//	go test -run '^$' -bench . -count 5 ./otelstate
func BenchmarkGet(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	for _, mode := range []string{"off", "no-parent", "on"} {
		b.Run(mode, func(b *testing.B) {
			opts := &state.Options{SweepInterval: -1}
			if mode != "off" {
				opts.Tracer = otelstate.NewTracer(tp, nil)
			}
			st, err := state.New(memstate.New(), opts)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			if _, err := st.Set(ctx, "k", json.RawMessage(`{"n":1}`)); err != nil {
				b.Fatal(err)
			}
			if mode == "on" {
				c, s := tp.Tracer("bench").Start(ctx, "parent")
				defer s.End()
				ctx = c
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := st.Get(ctx, "k"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
