package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/sidecar"
)

// startSidecar starts a sidecar in this process: SQLite in dir, MCP over
// Streamable HTTP on a free loopback port. It returns the sidecar's URL
// and a function that stops it.
func startSidecar(ctx context.Context, dir string) (string, func() error, error) {
	cfg := sidecar.Defaults()
	cfg.Backend = sidecar.BackendSQLite
	cfg.DBPath = filepath.Join(dir, "fanout.db")
	cfg.Port = 0
	sc, err := loopback.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	return sc.URL, sc.Stop, nil
}
