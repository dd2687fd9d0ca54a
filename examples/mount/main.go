// Command mount shows how to add the state tools to an MCP server you
// already have: the server keeps its own tools, and the 21 tools of
// package mcpadapter are mounted beside them under a prefix.
//
//	cd examples   # a module of its own
//	go run ./mount                          # stdio, memory store
//	go run ./mount -store sqlite:state.db -http 127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/memstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/mcpadapter"
)

// Prefix is put before the names of the mounted state tools.
const Prefix = "coord_"

// newServer is the application's own server, with its own tool, and the
// state tools mounted on it.
func newServer(st *state.Store) *server.MCPServer {
	s := server.NewMCPServer("word-tools", "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	s.AddTool(mcp.NewTool("shout",
		mcp.WithDescription("Return the text in capitals."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The text to shout.")),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true), mcp.WithOpenWorldHintAnnotation(false),
	), shout)
	mcpadapter.Register(s, st, &mcpadapter.Options{Prefix: Prefix})
	return s
}

func shout(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text, err := req.RequireString("text")
	if err != nil {
		return mcp.NewToolResultError(err.Error()), nil
	}
	return mcp.NewToolResultText(strings.ToUpper(text)), nil
}

func main() {
	storeURL := flag.String("store", "mem://", "state store URL: mem://, sqlite:state.db, redis://host:6379")
	httpAddr := flag.String("http", "", "serve Streamable HTTP at this address (path /mcp) instead of stdio")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)) // stdout is the stdio transport's
	if err := run(*storeURL, *httpAddr, log); err != nil {
		log.Error("mount", "err", err)
		os.Exit(1)
	}
}

func run(storeURL, httpAddr string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := state.Open(ctx, storeURL)
	if err != nil {
		return fmt.Errorf("opening the store: %w", err)
	}
	defer st.Close()
	s := newServer(st)
	if httpAddr == "" {
		// Started by hand in a terminal, it would otherwise sit silent.
		log.Info("serving MCP over stdio: JSON-RPC requests on stdin, answers on stdout (an MCP host starts this program; -http ADDR serves HTTP instead)")
		return server.ServeStdio(s)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true)))
	hs := &http.Server{Addr: httpAddr, Handler: mux}
	go func() {
		<-ctx.Done()
		_ = hs.Shutdown(context.Background())
	}()
	log.Info("serving", "url", "http://"+httpAddr+"/mcp", "store", st.Backend())
	if err := hs.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
