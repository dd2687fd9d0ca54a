package loopback_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/sidecar"
)

// A sidecar on SQLite in a temporary directory, on a free loopback port.
func ExampleStart() {
	dir, err := os.MkdirTemp("", "loopback-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	cfg := sidecar.Defaults()
	cfg.Backend, cfg.DBPath, cfg.Port = sidecar.BackendSQLite, filepath.Join(dir, "state.db"), 0
	sc, err := loopback.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.HasPrefix(sc.URL, "http://127.0.0.1:"))
	fmt.Println(sc.Stop())
	// Output:
	// true
	// <nil>
}
