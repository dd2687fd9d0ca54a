// Package otelstate traces a state.Store's backend calls with OpenTelemetry:
// each get, list, commit, claim, lease... becomes a span, the child of the
// span in the call's context (a tool call's span, when mcpadapter traces
// its tools, or any span of the application's own).
//
//	st := state.New(drv, &state.Options{Tracer: otelstate.NewTracer(tp, nil)})
//
// A span is named "state.<op>" ("state.commit"), of kind client, with the
// attributes db.system.name (sqlite, redis, postgresql, memory),
// db.operation.name (the op), state.namespace, state.items (keys read or
// writes applied, where it applies) and state.outcome: "ok", "not_found"
// (a get that found nothing), "condition_failed" (a commit whose condition
// failed: an optimistic writer will retry), or "error", which also sets
// error.type (closed, deadline_exceeded, canceled, or _OTHER) and the
// span's error status. A span never carries a key, a value or an error's
// text: keys are the callers' data, and a driver's error may name the
// backend's address (the sidecar logs it under an error id instead).
package otelstate

import (
	"context"
	"errors"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of a backend call's span.
const (
	attrSystem    = attribute.Key("db.system.name")
	attrOperation = attribute.Key("db.operation.name")
	attrErrorType = attribute.Key("error.type")
	attrNamespace = attribute.Key("state.namespace")
	attrItems     = attribute.Key("state.items")
	attrOutcome   = attribute.Key("state.outcome")
)

// Options configure a Tracer. A nil *Options means defaults.
type Options struct {
	// RootSpans traces backend calls made outside any span too: the
	// background sweeper's, a readiness probe's ping, calls of code that
	// does not trace. By default such calls get no span, so that they do not
	// start a trace of their own every minute or every probe.
	RootSpans bool
}

// NewTracer returns a state.Tracer that gives every backend call of a
// Store a span from tp's tracer.
func NewTracer(tp trace.TracerProvider, opts *Options) state.Tracer {
	t := &tracer{t: tp.Tracer("github.com/statesidecar/state/otelstate", trace.WithInstrumentationVersion(state.Version))}
	if opts != nil {
		t.roots = opts.RootSpans
	}
	return t
}

type tracer struct {
	t     trace.Tracer
	roots bool
}

func noEnd(error) {}

// StartCall starts the call's span.
func (t *tracer) StartCall(ctx context.Context, c state.BackendCall) (context.Context, func(error)) {
	if !t.roots && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noEnd
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, attrSystem.String(system(c.Backend)), attrOperation.String(c.Op))
	if c.Namespace != "" {
		attrs = append(attrs, attrNamespace.String(c.Namespace))
	}
	if c.Items > 0 {
		attrs = append(attrs, attrItems.Int(c.Items))
	}
	ctx, span := t.t.Start(ctx, "state."+c.Op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if !span.IsRecording() {
		return ctx, func(error) { span.End() }
	}
	return ctx, func(err error) {
		switch {
		case err == nil:
			span.SetAttributes(attrOutcome.String("ok"))
		case errors.Is(err, backend.ErrNotFound):
			span.SetAttributes(attrOutcome.String("not_found"))
		case errors.Is(err, state.ErrConflict):
			span.SetAttributes(attrOutcome.String("condition_failed"))
		default:
			kind := errorType(err)
			span.SetAttributes(attrOutcome.String("error"), attrErrorType.String(kind))
			span.SetStatus(codes.Error, kind)
		}
		span.End()
	}
}

// system is the db.system.name of a backend.
func system(backend string) string {
	if backend == "postgres" {
		return "postgresql"
	}
	return backend
}

// errorType is the error.type of a failed call: a class, never the text.
func errorType(err error) string {
	switch {
	case errors.Is(err, backend.ErrClosed):
		return "closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "_OTHER"
}
