package sidecar

import (
	"context"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// Bounded logs (issue 20): a flood of failing calls must not become a flood
// of log lines. Each message (its fixed text: "tool call failed", ...) may
// be logged logBurst times at once and logRate times a second after that;
// the records beyond are dropped, counted in MetricLogDropped, and the next
// record of that message that passes says how many were dropped before it.

// MetricLogDropped counts log records dropped by the rate limit, by level.
const MetricLogDropped = "state_sidecar_log_records_dropped_total"

const (
	logRate  = 10 // records per second of one message, sustained
	logBurst = 50 // records of one message at once
	// logMessages bounds the messages tracked; beyond it, a new message
	// shares one limiter with the other untracked ones.
	logMessages = 1024
)

// A limitedHandler is a slog.Handler that rate-limits each message.
type limitedHandler struct {
	slog.Handler
	*logLimits
}

// logLimits are the limiters, shared by a handler and those made from it
// by WithAttrs and WithGroup.
type logLimits struct {
	mu      sync.Mutex
	byMsg   map[string]*msgLimit
	dropped *prometheus.CounterVec
}

type msgLimit struct {
	lim     *rate.Limiter
	dropped int64
}

// limitLogs returns l behind the rate limit, the drops counted in reg.
func limitLogs(l *slog.Logger, reg prometheus.Registerer) *slog.Logger {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricLogDropped,
		Help: "Log records dropped because their message was logged too often, by level."}, []string{"level"})
	reg.MustRegister(dropped)
	return slog.New(limitedHandler{l.Handler(), &logLimits{byMsg: map[string]*msgLimit{}, dropped: dropped}})
}

// Handle logs r unless its message is over its rate.
func (h limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	key := r.Message
	h.mu.Lock()
	m := h.byMsg[key]
	if m == nil {
		if len(h.byMsg) >= logMessages {
			key = "\x00other"
			m = h.byMsg[key]
		}
		if m == nil {
			m = &msgLimit{lim: rate.NewLimiter(logRate, logBurst)}
			h.byMsg[key] = m
		}
	}
	if !m.lim.Allow() {
		m.dropped++
		h.mu.Unlock()
		h.dropped.WithLabelValues(r.Level.String()).Inc()
		return nil
	}
	before := m.dropped
	m.dropped = 0
	h.mu.Unlock()
	if before > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64("dropped_before", before))
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the limits.
func (h limitedHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return limitedHandler{h.Handler.WithAttrs(a), h.logLimits}
}

// WithGroup keeps the limits.
func (h limitedHandler) WithGroup(name string) slog.Handler {
	return limitedHandler{h.Handler.WithGroup(name), h.logLimits}
}
