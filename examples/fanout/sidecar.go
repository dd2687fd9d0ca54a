package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/statesidecar/state/sidecar"
)

// startSidecar starts a sidecar in this process: SQLite in dir, MCP over
// Streamable HTTP on a free loopback port. It returns the sidecar's URL
// and a function that stops it.
func startSidecar(ctx context.Context, dir string) (string, func() error, error) {
	cfg := sidecar.Defaults()
	cfg.Backend = sidecar.BackendSQLite
	cfg.DBPath = filepath.Join(dir, "fanout.db")
	cfg.Host, cfg.Port = "127.0.0.1", 0
	sc, err := sidecar.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		_ = sc.Close()
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sc.Serve(sctx, ln) }()
	stop := func() error {
		cancel()
		return errors.Join(<-served, sc.Close())
	}
	return "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), stop, nil
}
