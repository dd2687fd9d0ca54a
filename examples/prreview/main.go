// Command prreview is the PR-review pipeline demo of the State Sidecar, as
// shown in the talk that introduced it: three kinds of reviewer agents
// (security, performance, style), each a separate process that knows
// nothing of the others, coordinate only through the sidecar's MCP tools,
// and a live dashboard shows what they do.
//
//	cd examples   # a module of its own
//	go run ./prreview                  # dashboard at http://127.0.0.1:8088, its own SQLite sidecar
//	go run ./prreview -sidecar http://127.0.0.1:8000   # any running sidecar (token: PRREVIEW_SIDECAR_TOKEN)
//
// The dashboard starts agents as processes of this same program ("prreview
// agent -kind security ..."), or of the Node reviewer in node/ written with
// the official MCP TypeScript SDK. Agents speak MCP over Streamable HTTP to
// the sidecar and to nothing else; the dashboard learns what they do from
// the sidecar and from the JSON lines they print. Ctrl-C stops the
// dashboard and every agent it started.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "prreview:", err)
		os.Exit(1)
	}
}

// config is the dashboard's configuration.
type config struct {
	Addr         string
	SidecarURL   string
	SidecarToken string
	SidecarPort  int
	DataDir      string
	ClaimTTL     time.Duration
	GitHubAPI    string
	GitHubToken  string
	NodeDir      string
	OwnDB        string // set when the demo runs its own sidecar
}

func parseFlags(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	c := config{}
	fs := flag.NewFlagSet("prreview", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Addr, "addr", or(getenv("PRREVIEW_ADDR"), "127.0.0.1:8088"), "dashboard address (env PRREVIEW_ADDR)")
	fs.StringVar(&c.SidecarURL, "sidecar", getenv("PRREVIEW_SIDECAR"), "URL of a running sidecar (env PRREVIEW_SIDECAR); empty: run one on SQLite")
	fs.StringVar(&c.SidecarToken, "sidecar-token", getenv("PRREVIEW_SIDECAR_TOKEN"), "bearer token of that sidecar (prefer env PRREVIEW_SIDECAR_TOKEN: flags show in ps)")
	fs.IntVar(&c.SidecarPort, "sidecar-port", 0, "port of the demo's own sidecar (0: a free one)")
	fs.StringVar(&c.DataDir, "data-dir", "", "directory of the demo's own sidecar's SQLite file (default: a temporary one, removed on exit)")
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", 5*time.Second, "claim TTL of the agents: how soon a crashed agent's run can be taken over")
	fs.StringVar(&c.GitHubAPI, "github-api", or(getenv("GITHUB_API_URL"), "https://api.github.com"), "GitHub REST API base URL (env GITHUB_API_URL)")
	fs.StringVar(&c.NodeDir, "node-agent", "", "directory of the Node reviewer (default: examples/prreview/node, found from here)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q (the agent subcommand must come first: prreview agent ...)", fs.Arg(0))
	}
	c.GitHubToken = getenv("GITHUB_TOKEN")
	if c.ClaimTTL < 500*time.Millisecond {
		return c, fmt.Errorf("-claim-ttl %s is too short: at least 500ms", c.ClaimTTL)
	}
	if c.SidecarURL != "" {
		if _, err := endpointOf(c.SidecarURL); err != nil {
			return c, err
		}
		c.SidecarURL = strings.TrimSuffix(strings.TrimRight(c.SidecarURL, "/"), "/mcp")
	}
	if c.NodeDir == "" {
		c.NodeDir = defaultNodeDir()
	}
	return c, nil
}

func or(v, def string) string {
	if v != "" {
		return v
	}
	return def
}

// defaultNodeDir finds the Node reviewer: under the working directory (the
// repository root or this directory), or beside this source file (go run).
func defaultNodeDir() string {
	cands := []string{filepath.Join("examples", "prreview", "node"), "node"}
	if _, file, _, ok := runtime.Caller(0); ok {
		cands = append(cands, filepath.Join(filepath.Dir(file), "node"))
	}
	for _, c := range cands {
		if _, err := os.Stat(filepath.Join(c, "reviewer.mjs")); err == nil {
			if abs, err := filepath.Abs(c); err == nil {
				return abs
			}
		}
	}
	return ""
}

// run is the dashboard program: it starts the sidecar if needed, serves
// the page until ctx ends, then stops every agent and the sidecar.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("the dashboard cannot listen on %s (%v): pass -addr with a free port, such as -addr 127.0.0.1:0", cfg.Addr, err)
	}
	defer ln.Close()

	if cfg.SidecarURL == "" {
		dir := cfg.DataDir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "prreview-"); err != nil {
				return err
			}
			defer os.RemoveAll(dir)
		} else if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		own, err := startSidecar(ctx, dir, cfg.SidecarPort, "", log)
		if err != nil {
			return fmt.Errorf("starting the demo's own sidecar: %w", err)
		}
		defer func() {
			if serr := own.stop(); serr != nil && err == nil {
				err = fmt.Errorf("stopping the sidecar: %w", serr)
			}
		}()
		cfg.SidecarURL, cfg.OwnDB = own.URL, own.DBPath
	}
	c, _ := newMCPClient(cfg.SidecarURL, cfg.SidecarToken, "prreview-dashboard")
	defer c.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start agents: %w", err)
	}
	d := newDemo(cfg, c, exe)

	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); d.watch(wctx) }()

	srv := &http.Server{Handler: d.routes(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return wctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	url := "http://" + ln.Addr().String()
	fmt.Fprintf(stdout, "PR-review demo: open %s\n", url)
	if cfg.OwnDB != "" {
		fmt.Fprintf(stdout, "sidecar: %s/mcp (its own, SQLite at %s)\n", cfg.SidecarURL, cfg.OwnDB)
	} else {
		fmt.Fprintf(stdout, "sidecar: %s/mcp\n", cfg.SidecarURL)
	}
	if !d.node.Available {
		fmt.Fprintf(stdout, "node reviewer: off. %s\n", d.node.Hint)
	}
	d.hub.system("info", "Dashboard initialized. Awaiting GitHub PR URL input...")

	select {
	case <-ctx.Done():
	case err := <-served:
		stopWatch()
		_ = d.sup.stopAll(true, time.Minute)
		return fmt.Errorf("serving the dashboard: %w", err)
	}
	fmt.Fprintln(stdout, "stopping: every agent, the dashboard, the sidecar")
	stopErr := d.sup.stopAll(true, time.Minute)
	stopWatch() // ends the event streams too (their context)
	<-watched
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return stopErr
}
