// Command server is the MCP State Sidecar: the 19 state tools over
// Streamable HTTP (at /mcp, stateless by default) or stdio, on SQLite, Redis
// or memory. Configuration is by environment, each variable overridden by a
// flag of the same meaning; run with -h for the list, or see package
// examples/server/sidecar.
//
//	go run ./examples/server                       # HTTP on 127.0.0.1:8000, SQLite file state_sidecar.db
//	go run ./examples/server -transport stdio      # for an MCP host that launches it
//
// SIGTERM or SIGINT stops it gracefully: no new requests, calls in flight
// finish, the store is closed, exit status 0. Logs go to stderr; stdout is
// reserved for the stdio transport.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/statesidecar/state/examples/server/sidecar"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := sidecar.Run(ctx, os.Args[1:], os.LookupEnv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	case errors.Is(err, sidecar.ErrConfig), errors.Is(err, sidecar.ErrProtectedMode):
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}
