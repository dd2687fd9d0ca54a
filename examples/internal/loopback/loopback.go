// Package loopback runs a sidecar inside an example's own process, serving
// MCP over Streamable HTTP on a loopback port, for the examples that bring
// a sidecar of their own.
package loopback

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"

	"github.com/statesidecar/state/sidecar"
)

// A Sidecar is a sidecar serving on a loopback port of this process.
type Sidecar struct {
	// URL is the sidecar's base URL, http://127.0.0.1:PORT (its MCP
	// endpoint is URL+"/mcp").
	URL string
	// Sidecar is the sidecar itself, for its Store.
	Sidecar *sidecar.Sidecar

	cancel context.CancelFunc
	served chan error
}

// Start starts a sidecar with cfg, listening on 127.0.0.1 at cfg.Port (0
// picks a free port). Stop stops it.
func Start(ctx context.Context, cfg sidecar.Config, log *slog.Logger) (*Sidecar, error) {
	cfg.Host = "127.0.0.1"
	sc, err := sidecar.New(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		_ = sc.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Sidecar{
		URL:     "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
		Sidecar: sc,
		cancel:  cancel,
		served:  make(chan error, 1),
	}
	go func() { s.served <- sc.Serve(sctx, ln) }()
	return s, nil
}

// Stop stops serving and closes the sidecar and its store; it returns once
// both are done. Call it once.
func (s *Sidecar) Stop() error {
	s.cancel()
	return errors.Join(<-s.served, s.Sidecar.Close())
}
