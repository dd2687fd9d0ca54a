package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/console"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/mcptasks"
	"github.com/statesidecar/state/otelstate"
)

// A Sidecar is an open store with its MCP server, HTTP handler and metrics.
// Create one with New, serve it with Serve, ListenAndServe or ServeStdio,
// and Close it.
type Sidecar struct {
	cfg      Config
	log      *slog.Logger
	store    *state.Store
	metrics  *Metrics
	mcp      *server.MCPServer
	mcpHTTP  *server.StreamableHTTPServer
	sessions *sessions // stateful HTTP only
	admit    *admission
	conns    *connTracker
	tasks    *mcptasks.Tasks
	console  *console.Console // nil when the console is off (console.go)
	auth     *authenticator   // nil without authentication
	handler  http.Handler
	draining atomic.Bool

	// hardStop ends tool calls that outlive the shutdown deadline (stdio).
	hardStop   context.Context
	hardCancel context.CancelFunc
}

// New opens the configured backend and builds the sidecar. log receives
// everything the sidecar logs, the details of errors that clients see only
// by id included; it must not write to stdout in stdio mode.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Sidecar, error) {
	u, err := cfg.StoreURL()
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.warnings {
		log.Warn("setting ignored", "why", w)
	}
	s := &Sidecar{cfg: cfg, metrics: NewMetrics()}
	s.log = limitLogs(log, s.metrics.reg) // logs.go: a flood logs a bounded number of lines
	log = s.log
	s.hardStop, s.hardCancel = context.WithCancel(context.Background())
	opts := s.storeOptions()
	if opts.Encryption, err = openEncryption(ctx, cfg, log); err != nil {
		return nil, err
	}
	s.store, err = state.DefaultURLMux().Open(ctx, u, opts)
	if errors.Is(err, sqlitestate.ErrPythonDatabase) {
		return nil, pythonDatabaseError(cfg)
	}
	if err != nil {
		// The driver's error may repeat the URL: log it, return it redacted.
		return nil, fmt.Errorf("opening the %s backend at %s: %w", cfg.Backend, redact(u), err)
	}
	for _, t := range cfg.Tokens {
		if t.Namespace == "" {
			continue
		}
		if _, err := s.store.Namespace(t.Namespace); err != nil {
			_ = s.store.Close()
			return nil, fmt.Errorf("%w: SIDECAR_AUTH_TOKENS: %v", ErrConfig, err)
		}
	}
	s.metrics.SetInfo(s.store.Backend(), cfg.Transport)
	if cfg.Transport == TransportHTTP && cfg.authenticates() {
		if s.auth, err = s.newAuthenticator(ctx); err != nil {
			_ = s.store.Close()
			return nil, err
		}
	}
	s.mcp = mcpadapter.NewServer(s.store, &mcpadapter.Options{
		Authorize:            s.authorize,
		AllowReset:           cfg.AllowReset,
		AllowErase:           cfg.AllowErase,
		SubjectFromPrincipal: cfg.SubjectFromPrincipal,
		ClaimTTL:             cfg.ClaimTTL,
		Observe:              s.metrics.ObserveTool,
		Logger:               log,
		TracerProvider:       cfg.TracerProvider,
	}, append(s.taskServerOptions(), s.serverOptions()...)...)
	if err := s.startTasks(); err != nil {
		_ = s.store.Close()
		return nil, err
	}
	s.admit = newAdmission(cfg.Fair, s.metrics.reg)
	s.conns = newConnTracker(cfg, s.metrics.reg)
	if cfg.Stateful {
		s.sessions = newSessions(cfg.MaxSessions, s.admit.endSession)
		s.metrics.watchSessions(s.sessions.count)
	}
	s.mcpHTTP = server.NewStreamableHTTPServer(s.mcp, s.httpOptions()...)
	if err := s.newConsole(); err != nil {
		_ = s.Close()
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// storeOptions maps the configuration to the store's options; the
// configuration's "0 means no limit" is the store's negative value.
func (s *Sidecar) storeOptions() *state.Options {
	c := &s.cfg
	orOff := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	maxEvents := c.HistoryMaxEvents
	if maxEvents == 0 {
		maxEvents = -1
	}
	var tracer state.Tracer
	if c.TracerProvider != nil {
		tracer = otelstate.NewTracer(c.TracerProvider, nil)
	}
	return &state.Options{
		Observer:          s.metrics.ObserveBackend,
		Tracer:            tracer,
		ClaimTTL:          c.ClaimTTL,
		IdempotencyWindow: c.IdempotencyWindow,
		Logger:            s.log,
		Limits:            c.Limits,
		SweepInterval:     orOff(c.SweepInterval),
		SweepGrace:        c.SweepGrace,
		HistoryMaxAge:     orOff(c.HistoryMaxAge),
		HistoryMaxEvents:  maxEvents,
	}
}

// serverOptions are the MCP server's own options: every tool call gets the
// request deadline; on stdio a call is first detached from mcp-go's
// cancellation at the end of input (see detach).
func (s *Sidecar) serverOptions() []server.ServerOption {
	var opts []server.ServerOption
	if s.cfg.Transport == TransportStdio {
		opts = append(opts, server.WithToolHandlerMiddleware(s.detach))
	}
	if s.cfg.AccessLog {
		opts = append(opts, server.WithToolHandlerMiddleware(s.accessLog))
	}
	return append(opts, server.WithToolHandlerMiddleware(s.deadline))
}

// deadline is a tool middleware that bounds every call by
// Config.RequestTimeout, so that no call waits on a hung backend without
// limit. A long-poll (state_wait, workflow_wait) gets its own wait on top
// (mcpadapter.LongPollTimeout), so that the request timeout bounds the
// backend work, not the waiting the client asked for.
func (s *Sidecar) deadline(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if isTask(ctx) {
			return next(ctx, req) // bounded by the task's own lifetime
		}
		timeout := s.cfg.RequestTimeout
		if wait, ok := mcpadapter.LongPollTimeout(req.Params.Name, req.Params.Arguments); ok {
			timeout += wait
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return next(ctx, req)
	}
}

// Handler returns the sidecar's HTTP handler: /mcp, /healthz, /readyz and
// /metrics, with authentication, the body deadline and size, and the cap on
// requests served at once in front of /mcp. Wrap it to add middleware of
// your own (tracing, access logs). Serve adds what belongs to the server:
// the header deadline and the cap on connections.
func (s *Sidecar) Handler() http.Handler { return s.handler }

// Store returns the sidecar's store.
func (s *Sidecar) Store() *state.Store { return s.store }

// MCPServer returns the sidecar's MCP server, for in-process clients.
func (s *Sidecar) MCPServer() *server.MCPServer { return s.mcp }

// Metrics returns the sidecar's metrics.
func (s *Sidecar) Metrics() *Metrics { return s.metrics }

// Close closes the store, waiting for calls in flight to it.
func (s *Sidecar) Close() error {
	s.stopTasks()
	s.hardCancel()
	return s.store.Close()
}

// redact hides a password in a backend URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
