package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
)

// MaxRequestBytes bounds the body of one HTTP request to /mcp. Values are
// limited to 1 MiB by default (state.Limits); the rest is JSON-RPC framing.
const MaxRequestBytes = 8 << 20

// A Sidecar is an open store with its MCP server, HTTP handler and metrics.
// Create one with New, serve it with Serve or ServeStdio, and Close it.
type Sidecar struct {
	cfg      Config
	log      *slog.Logger
	store    *state.Store
	metrics  *Metrics
	mcp      *server.MCPServer
	mcpHTTP  *server.StreamableHTTPServer
	handler  http.Handler
	draining atomic.Bool

	// hardStop ends tool calls that outlive the shutdown deadline (stdio).
	hardStop   context.Context
	hardCancel context.CancelFunc
}

// New opens the configured backend and builds the sidecar. log receives
// everything the sidecar logs; it must not write to stdout in stdio mode.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Sidecar, error) {
	u, err := cfg.StoreURL()
	if err != nil {
		return nil, err
	}
	s := &Sidecar{cfg: cfg, log: log, metrics: NewMetrics()}
	s.hardStop, s.hardCancel = context.WithCancel(context.Background())
	s.store, err = state.DefaultURLMux().Open(ctx, u, &state.Options{
		Observer: s.metrics.ObserveBackend,
		ClaimTTL: cfg.ClaimTTL,
		Logger:   log,
	})
	if err != nil {
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

	var serverOpts []server.ServerOption
	if cfg.Transport == TransportStdio {
		serverOpts = append(serverOpts, server.WithToolHandlerMiddleware(s.detach))
	}
	s.mcp = mcpadapter.NewServer(s.store, &mcpadapter.Options{
		AllowReset: cfg.AllowReset,
		ClaimTTL:   cfg.ClaimTTL,
		Observe:    s.metrics.ObserveTool,
	}, serverOpts...)
	s.mcpHTTP = server.NewStreamableHTTPServer(s.mcp, s.httpOptions()...)
	s.handler = s.routes()
	return s, nil
}

// httpOptions configures mcp-go's Streamable HTTP transport.
func (s *Sidecar) httpOptions() []server.StreamableHTTPOption {
	opts := []server.StreamableHTTPOption{
		server.WithStreamableHTTPLogger(quieter(s.log.With("component", "mcp-go"), s.cfg)),
	}
	if s.cfg.Stateful {
		// Sessions live in this process's memory: older clients need sticky
		// sessions. Sessions abandoned without a DELETE are swept.
		opts = append(opts, server.WithStateful(true), server.WithSessionIdleTTL(time.Hour))
	} else {
		// Any replica answers any request; no GET stream, which in stateless
		// mode would be one stream shared by every older client.
		opts = append(opts, server.WithStateLess(true), server.WithDisableStreaming(true))
	}
	if len(s.cfg.Tokens) > 0 {
		// The DNS-rebinding guard protects an unauthenticated loopback server
		// from web pages; a bearer token does that better, and the guard
		// would reject a same-pod proxy that keeps the original Host.
		opts = append(opts, server.WithDisableLocalhostProtection(true))
	}
	return opts
}

// routes builds the HTTP handler: /mcp, /healthz, /readyz and /metrics.
func (s *Sidecar) routes() http.Handler {
	var mcpHandler http.Handler = s.mcpHTTP
	if len(s.cfg.Tokens) > 0 {
		mcpHandler = NewAuthenticator(s.cfg.Tokens, s.metrics.AuthFailed).Wrap(mcpHandler)
	}
	mcpHandler = s.metrics.InstrumentMCP(http.MaxBytesHandler(mcpHandler, MaxRequestBytes))
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.Handler())
	return mux
}

// Handler returns the sidecar's HTTP handler.
func (s *Sidecar) Handler() http.Handler { return s.handler }

// Store returns the sidecar's store.
func (s *Sidecar) Store() *state.Store { return s.store }

// MCPServer returns the sidecar's MCP server, for in-process clients.
func (s *Sidecar) MCPServer() *server.MCPServer { return s.mcp }

// Metrics returns the sidecar's metrics.
func (s *Sidecar) Metrics() *Metrics { return s.metrics }

// Close closes the store, waiting for calls in flight to it.
func (s *Sidecar) Close() error {
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
