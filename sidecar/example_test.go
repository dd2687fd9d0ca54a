package sidecar_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/sidecar"
)

// Configuration comes from the environment; a flag overrides its variable.
func ExampleLoad() {
	env := map[string]string{
		"STATE_BACKEND":       "memory",
		"SIDECAR_PORT":        "9000",
		"SIDECAR_AUTH_TOKENS": "s3cret:team-a,other",
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := sidecar.Load([]string{"-port", "9100"}, lookup, io.Discard)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Backend, cfg.Addr(), cfg.Transport, cfg.Tokens, cfg.ClaimTTL)

	_, err = sidecar.Load(nil, func(k string) (string, bool) {
		if k == "STATE_BACKEND" {
			return "postgresql", true
		}
		return "", false
	}, io.Discard)
	fmt.Println(err)
	// Output:
	// memory 127.0.0.1:9100 http [token(team-a) token((default))] 10m0s
	// configuration error: STATE_BACKEND: unknown backend "postgresql": valid values are sqlite, redis, postgres, memory, s3, file
}

// Protected mode: a public bind needs tokens (or an explicit opt-out).
func ExampleConfig_CheckProtected() {
	cfg := sidecar.Defaults()
	cfg.Host = "0.0.0.0"
	fmt.Println(cfg.CheckProtected() != nil)
	cfg.Tokens, _ = sidecar.ParseTokens("s3cret:team-a")
	fmt.Println(cfg.CheckProtected() != nil)
	// Output:
	// true
	// false
}

// A sidecar in-process: its MCP server for an in-process client, and its
// HTTP handler (here behind httptest) for health and metrics.
func ExampleNew() {
	ctx := context.Background()
	cfg := sidecar.Defaults()
	cfg.Backend = sidecar.BackendMemory
	sc, err := sidecar.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sc.Close()

	c, _ := client.NewInProcessClient(sc.MCPServer())
	defer c.Close()
	_ = c.Start(ctx)
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		fmt.Println(err)
		return
	}
	tools, _ := c.ListTools(ctx, mcp.ListToolsRequest{})
	fmt.Println(len(tools.Tools), "tools")
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = "state_set", map[string]any{"key": "greeting", "value": "hello"}
	res, _ := c.CallTool(ctx, req)
	fmt.Println(res.Content[0].(mcp.TextContent).Text)

	rec := httptest.NewRecorder()
	sc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 21 tools
	// {"ok":true,"version":1}
	// 200 {"backend":"memory","status":"ok","version":"0.1.0"}
}

// Main is the whole state-sidecar command line. Commands beside serve and
// version plug in as Command values (ImportCommand is one).
func ExampleMain() {
	greet := sidecar.Command{
		Name:  "greet",
		Usage: "greet NAME        say hello",
		Run: func(_ context.Context, args []string, env sidecar.Env) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: greet takes one name", sidecar.ErrConfig)
			}
			fmt.Fprintln(env.Stdout, "hello", args[0])
			return nil
		},
	}
	env := sidecar.Env{LookupEnv: func(string) (string, bool) { return "", false },
		Stdin: strings.NewReader(""), Stdout: os.Stdout, Stderr: os.Stdout}
	ctx := context.Background()
	fmt.Println(sidecar.Main(ctx, []string{"greet", "gophers"}, env, greet))
	fmt.Println(sidecar.Main(ctx, []string{"greet"}, env, greet))
	fmt.Println(sidecar.Main(ctx, []string{"-port", "http"}, env, greet))
	// Output:
	// hello gophers
	// 0
	// state-sidecar: configuration error: greet takes one name
	// 2
	// state-sidecar: configuration error: -port: "http" is not a port number (0-65535)
	// 2
}

// A program's main function that is the state-sidecar command (as
// cmd/state-sidecar and examples/server are). It exits the process, so
// this example is compiled but not run.
func ExampleProcessMain() {
	sidecar.ProcessMain()
}
