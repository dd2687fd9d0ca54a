package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/statesidecar/state"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracingVariables are the OpenTelemetry environment variables the command
// reads itself to decide whether and how to export traces; the OTLP
// exporter and the SDK read the others they define (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_CERTIFICATE,
// OTEL_TRACES_SAMPLER, OTEL_RESOURCE_ATTRIBUTES, OTEL_BSP_*, ...) from the
// process environment as the OpenTelemetry specification says.
var TracingVariables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME",
}

// tracingUsage is what -h says about tracing.
const tracingUsage = `Tracing (OpenTelemetry): off unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
is set or OTEL_TRACES_EXPORTER=otlp; OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turn it off.
OTEL_EXPORTER_OTLP_PROTOCOL is http/protobuf (the default) or grpc; the other OTEL_* variables
(headers, TLS, sampler, resource attributes, service name: state-sidecar by default) work as the
OpenTelemetry specification defines them. Each tool call is a span, each backend call its child;
the parent comes from params._meta or the request's traceparent header.
`

// tracingFromEnv returns the tracer provider the OTEL_* variables ask for,
// and a description of where it exports; nil when they do not ask for
// traces. Its exporter connects lazily: a collector that is down costs
// dropped spans and a logged warning, never a failed start.
func tracingFromEnv(ctx context.Context, lookup func(string) (string, bool)) (*sdktrace.TracerProvider, string, error) {
	get := func(k string) string {
		v, _ := lookup(k)
		return strings.TrimSpace(v)
	}
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return nil, "", nil
	}
	endpoint := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = get("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	switch exporters := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exporters {
	case "":
		if endpoint == "" {
			return nil, "", nil // the SDK's default would be OTLP to localhost: not unless asked
		}
	case "none":
		return nil, "", nil
	case "otlp":
	default:
		return nil, "", fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: this sidecar exports traces by OTLP only: set otlp or none",
			ErrConfig, exporters)
	}
	protocol := get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch protocol {
	case "", "http/protobuf":
		protocol = "http/protobuf"
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, "", fmt.Errorf("%w: OTEL_EXPORTER_OTLP_PROTOCOL=%q: valid values are http/protobuf, grpc", ErrConfig, protocol)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: the OTLP trace exporter: %v", ErrConfig, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", Name), attribute.String("service.version", state.Version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, "", fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: %v", ErrConfig, err)
	}
	if endpoint == "" {
		endpoint = "the default endpoint"
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)),
		"OTLP " + protocol + " to " + redactEndpoint(endpoint), nil
}

// redactEndpoint hides a password in an endpoint URL, if it has one.
func redactEndpoint(e string) string {
	if u, err := url.Parse(e); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return e
}

// startTracing builds the tracer provider from the environment into cfg and
// returns the function that flushes and stops it (a no-op without tracing).
// Errors of the exporter (a collector that cannot be reached) are logged.
func startTracing(ctx context.Context, cfg *Config, lookup func(string) (string, bool), log *slog.Logger) (func(), error) {
	tp, where, err := tracingFromEnv(ctx, lookup)
	if err != nil || tp == nil {
		return func() {}, err
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	cfg.TracerProvider = tp
	log.Info("tracing on", "export", where)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			log.Warn("tracing: spans not flushed at shutdown", "err", err)
		}
	}, nil
}

// extractTrace puts the trace context of a request's headers (traceparent,
// tracestate, baggage) in its context, where the tool call spans find it.
func extractTrace(next http.Handler) http.Handler {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("traceparent") != "" || r.Header.Get("baggage") != "" {
			r = r.WithContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		next.ServeHTTP(w, r)
	})
}
