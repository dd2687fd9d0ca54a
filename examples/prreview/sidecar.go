package main

// The one place the demo imports the sidecar package, to run a sidecar of
// its own when none is given with -sidecar.

import (
	"context"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/sidecar"
)

// An ownSidecar is the sidecar the demo runs itself: SQLite in dir, MCP
// over Streamable HTTP on a loopback port, in this process. The agents and
// the dashboard reach it over HTTP like any other sidecar.
type ownSidecar struct {
	URL, DBPath string
	stop        func() error
}

// startSidecar starts a sidecar on SQLite in dir, listening on port (0
// picks a free one) of 127.0.0.1. tokens, if any, are required as bearer
// tokens ("token" or "token:namespace", comma-separated).
func startSidecar(ctx context.Context, dir string, port int, tokens string, log *slog.Logger) (*ownSidecar, error) {
	cfg := sidecar.Defaults()
	if tokens != "" {
		var err error
		if cfg.Tokens, err = sidecar.ParseTokens(tokens); err != nil {
			return nil, err
		}
	}
	cfg.Backend = sidecar.BackendSQLite
	cfg.DBPath = filepath.Join(dir, "prreview.db")
	cfg.Port = port
	cfg.ShutdownTimeout = 5 * time.Second
	sc, err := loopback.Start(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	return &ownSidecar{URL: sc.URL, DBPath: cfg.DBPath, stop: sc.Stop}, nil
}
