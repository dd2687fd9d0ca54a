package sidecar

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/mcpadapter"
)

// Metric names, all prefixed "state_sidecar_".
const (
	MetricToolCalls       = "state_sidecar_tool_calls_total"
	MetricToolErrors      = "state_sidecar_tool_errors_total"
	MetricToolDuration    = "state_sidecar_tool_call_duration_seconds"
	MetricBackendDuration = "state_sidecar_backend_call_duration_seconds"
	MetricBackendErrors   = "state_sidecar_backend_errors_total"
	MetricHTTPInFlight    = "state_sidecar_http_requests_in_flight"
	MetricHTTPRequests    = "state_sidecar_http_requests_total"
	MetricAuthFailures    = "state_sidecar_auth_failures_total"
	MetricSessions        = "state_sidecar_sessions"
	MetricInfo            = "state_sidecar_info"
)

// Metrics are the sidecar's Prometheus metrics, in a registry of their own
// (so that several sidecars can run in one process, as in tests).
type Metrics struct {
	reg             *prometheus.Registry
	toolCalls       *prometheus.CounterVec
	toolErrors      *prometheus.CounterVec
	toolDuration    *prometheus.HistogramVec
	backendDuration *prometheus.HistogramVec
	backendErrors   *prometheus.CounterVec
	inFlight        prometheus.Gauge
	httpRequests    *prometheus.CounterVec
	authFailures    prometheus.Counter
	info            *prometheus.GaugeVec
	// tools holds each tool's series, looked up once: read-only after
	// NewMetrics.
	tools map[string]toolSeries
}

// toolSeries are one tool's counters. (Its histogram series is made at its
// first call, so that /metrics lists no histogram of a tool never called.)
type toolSeries struct {
	calls, errors prometheus.Counter
}

// latencyBuckets span 50µs to 10s: an in-memory call to a slow backend.
var latencyBuckets = prometheus.ExponentialBucketsRange(50e-6, 10, 16)

// NewMetrics returns the metrics, with every tool's series present at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricToolCalls,
			Help: "MCP tool calls, by tool."}, []string{"tool"}),
		toolErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricToolErrors,
			Help: "MCP tool calls that returned a tool error (isError), by tool."}, []string{"tool"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricToolDuration,
			Help: "Time to serve an MCP tool call, by tool.", Buckets: latencyBuckets}, []string{"tool"}),
		backendDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricBackendDuration,
			Help:    "Time of a backend operation, by operation (get, list, commit, claim, ...).",
			Buckets: latencyBuckets}, []string{"call"}),
		backendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricBackendErrors,
			Help: "Backend operations that failed, by operation."}, []string{"call"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHTTPInFlight,
			Help: "HTTP requests to /mcp being served."}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricHTTPRequests,
			Help: "HTTP requests to /mcp, by status code and method."}, []string{"code", "method"}),
		authFailures: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricAuthFailures,
			Help: "HTTP requests to /mcp rejected for a missing or unknown bearer token."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: MetricInfo,
			Help: "Always 1; labels describe the sidecar."}, []string{"version", "backend", "transport"}),
	}
	m.reg.MustRegister(m.toolCalls, m.toolErrors, m.toolDuration, m.backendDuration, m.backendErrors,
		m.inFlight, m.httpRequests, m.authFailures, m.info,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.tools = map[string]toolSeries{}
	for _, t := range mcpadapter.ToolNames() {
		m.tools[t] = toolSeries{calls: m.toolCalls.WithLabelValues(t), errors: m.toolErrors.WithLabelValues(t)}
	}
	return m
}

// Registry returns the registry the metrics are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveTool records one tool call; it has the signature of
// mcpadapter.Options.Observe.
func (m *Metrics) ObserveTool(tool string, took time.Duration, isError bool) {
	if s, ok := m.tools[tool]; ok {
		s.calls.Inc()
		if isError {
			s.errors.Inc()
		}
	} else {
		m.toolCalls.WithLabelValues(tool).Inc()
		if isError {
			m.toolErrors.WithLabelValues(tool).Inc()
		}
	}
	m.toolDuration.WithLabelValues(tool).Observe(took.Seconds())
}

// ObserveBackend records one backend operation; it is a state.Observer. A
// "not found" answer is not a failure.
func (m *Metrics) ObserveBackend(call string, took time.Duration, err error) {
	m.backendDuration.WithLabelValues(call).Observe(took.Seconds())
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		m.backendErrors.WithLabelValues(call).Inc()
	}
}

// SetInfo sets the info metric's labels.
func (m *Metrics) SetInfo(backend, transport string) {
	m.info.Reset()
	m.info.WithLabelValues(state.Version, backend, transport).Set(1)
}

// InstrumentMCP wraps the /mcp handler with the in-flight gauge and the
// request counter.
func (m *Metrics) InstrumentMCP(h http.Handler) http.Handler {
	return promhttp.InstrumentHandlerInFlight(m.inFlight, promhttp.InstrumentHandlerCounter(m.httpRequests, h))
}

// watchSessions exposes the number of live sessions of a stateful server.
func (m *Metrics) watchSessions(count func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricSessions,
		Help: "Live sessions of a stateful HTTP server."}, func() float64 { return float64(count()) }))
}

// AuthFailed counts one rejected request.
func (m *Metrics) AuthFailed() { m.authFailures.Inc() }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
