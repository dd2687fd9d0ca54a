package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ErrShutdownTimeout is returned when calls were still in flight at the
// shutdown deadline and had to be cut off.
var ErrShutdownTimeout = errors.New("calls still in flight at the shutdown deadline")

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully:
// it stops accepting, fails /readyz, and waits up to Config.ShutdownTimeout
// for the requests in flight to finish. It returns nil after a clean
// shutdown. It does not close the store: Close does. At most
// Config.MaxConnections connections are open at once (when all are, the
// oldest idle one is closed to make room; conns.go), and a client gets
// Config.ReadTimeout to send a request's headers (an unauthenticated one,
// on a sidecar with tokens, FairConfig.UnauthenticatedIdleTimeout).
func (s *Sidecar) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.ReadTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         s.conns.connState,
		ConnContext:       withConn,
	}
	srv.RegisterOnShutdown(s.stopTasks)    // tasks.go
	srv.RegisterOnShutdown(s.closeConsole) // console.go: ends its event streams
	ln = s.conns.listener(ln)              // conns.go
	if s.cfg.Stateful {
		// Long-lived GET streams of stateful sessions would hold Shutdown
		// until the deadline: end them when it starts.
		srv.RegisterOnShutdown(func() { s.mcpHTTP.CloseSessions(context.Background()) })
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serving HTTP on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}

	s.draining.Store(true)
	s.log.Info("shutting down: no new connections, finishing requests in flight",
		"timeout", s.cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("%w (%v): %v", ErrShutdownTimeout, s.cfg.ShutdownTimeout, err)
	}
	_ = s.mcpHTTP.Shutdown(sctx) // stops the stateful session sweeper
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ListenAndServe listens on Config.Addr and calls Serve. It logs the address
// it listens on (useful with port 0).
func (s *Sidecar) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr())
	if err != nil {
		return fmt.Errorf("listening on %s: %w", s.cfg.Addr(), err)
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "mcp", "http://"+ln.Addr().String()+"/mcp")
	if s.console != nil {
		s.log.Info("operator console", "url", "http://"+ln.Addr().String()+"/ui/")
	}
	return s.Serve(ctx, ln)
}
