// Command waiters measures what waiting for change costs a sidecar: the
// CPU time one sidecar process spends while many clients wait in
// state_wait long-polls and nothing changes, and how long after a write
// its waiter returns.
//
//	cd examples   # a module of its own
//	go run ./waiters                                  # SQLite, 1000 waiters, 10 s idle
//	go run ./waiters -backend redis -redis-url redis://127.0.0.1:6379/0
//	go run ./waiters -backend postgres -postgres-url 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./waiters -writer direct                   # writes from this process, not through the sidecar
//
// It starts the sidecar (package sidecar, stateless HTTP) as a child
// process, so that the child's CPU time (utime+stime, from /proc) is the
// sidecar's alone. It reads that time over the idle period with no waiter,
// then with -waiters parked state_wait calls, each on a key of its own.
// With the waiters still parked it then times -wakes wake-ups: a waiter
// on one more key, then a write of that key, either a state_set through
// the sidecar (-writer mcp) or a Set by this process on the same database
// (-writer direct: another process's write, which the sidecar learns of
// through the backend: SQLite's data_version, Redis pub/sub, PostgreSQL
// LISTEN/NOTIFY). The latency
// is from the start of the write to the return of the waiter's call.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/pgstate"     // postgres:// for -writer direct
	_ "github.com/statesidecar/state/backend/redisstate"  // redis:// for -writer direct
	_ "github.com/statesidecar/state/backend/sqlitestate" // sqlite: for -writer direct
	"github.com/statesidecar/state/sidecar"

	"github.com/statesidecar/state/examples/internal/cli"
	"github.com/statesidecar/state/examples/internal/procs"
	"github.com/statesidecar/state/examples/internal/rediskeys"
)

func main() {
	cli.Main("waiters", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout) })
}

type options struct {
	backend, redisURL, pgURL, writer string
	waiters, wakes                   int
	idle                             time.Duration
	serve                            string // child mode: the backend URL to serve
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("waiters", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.backend, "backend", "sqlite", "sqlite, redis or postgres")
	fs.StringVar(&o.pgURL, "postgres-url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL URL for -backend postgres (tables go in a schema of their own, dropped at the end)")
	fs.StringVar(&o.redisURL, "redis-url", "redis://127.0.0.1:6379/0", "Redis URL for -backend redis (keys go under a prefix of their own, deleted at the end)")
	fs.StringVar(&o.writer, "writer", "mcp", "who writes to wake a waiter: mcp (state_set through the sidecar) or direct (this process, on the same database)")
	fs.IntVar(&o.waiters, "waiters", 1000, "parked state_wait calls")
	fs.IntVar(&o.wakes, "wakes", 200, "wake-ups to time")
	fs.DurationVar(&o.idle, "idle", 10*time.Second, "idle period over which CPU time is read")
	fs.StringVar(&o.serve, "serve", "", "internal: serve a sidecar on this backend URL and print its address")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.serve != "" {
		return serve(ctx, o.serve)
	}
	if o.writer != "mcp" && o.writer != "direct" {
		return fmt.Errorf("-writer must be mcp or direct, got %q", o.writer)
	}
	storeURL, cleanup, err := storeURL(o)
	if err != nil {
		return err
	}
	defer cleanup()
	child, err := startChild(ctx, storeURL)
	if err != nil {
		return err
	}
	defer child.stop()
	c, err := connect(ctx, child.url, o.waiters+8)
	if err != nil {
		return err
	}
	defer c.Close()

	fmt.Fprintf(out, "backend %s, %d waiters, idle %v, writer %s\n", o.backend, o.waiters, o.idle, o.writer)
	base, err := child.cpuOver(ctx, o.idle)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "idle sidecar, no waiter:    CPU %v over %v (%.2f%% of one core)\n", base.Round(time.Millisecond), o.idle, pct(base, o.idle))

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var calls atomic.Int64
	for i := range o.waiters {
		wg.Go(func() {
			for wctx.Err() == nil { // call again when a wait times out, as a client would
				calls.Add(1)
				if _, err := wait(wctx, c, fmt.Sprintf("idle/%d", i), 0); err != nil && wctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "waiters: state_wait:", err)
					_ = sleep(wctx, time.Second)
				}
			}
		})
	}
	defer func() { cancel(); wg.Wait() }()
	if err := sleep(ctx, 3*time.Second); err != nil { // let every waiter park
		return err
	}
	busy, err := child.cpuOver(ctx, o.idle)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "idle sidecar, %d waiters: CPU %v over %v (%.2f%% of one core), %d state_wait calls\n", o.waiters, busy.Round(time.Millisecond), o.idle, pct(busy, o.idle), calls.Load())

	write, closeWriter, err := writer(ctx, o, c, storeURL)
	if err != nil {
		return err
	}
	defer closeWriter()
	lat := make([]time.Duration, 0, o.wakes)
	for n := range o.wakes {
		key := fmt.Sprintf("wake/%d", n)
		done := make(chan time.Time, 1)
		go func() {
			_, _ = wait(ctx, c, key, 0)
			done <- time.Now()
		}()
		if err := sleep(ctx, 30*time.Millisecond); err != nil { // let the waiter park
			return err
		}
		start := time.Now()
		if err := write(ctx, key); err != nil {
			return err
		}
		select {
		case end := <-done:
			lat = append(lat, end.Sub(start))
		case <-time.After(time.Minute):
			return errors.New("a waiter was not woken within a minute")
		}
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "wake-up latency over %d writes: p50 %v, p99 %v, max %v\n", len(lat),
		quantile(lat, 0.50).Round(10*time.Microsecond), quantile(lat, 0.99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
	return nil
}

func pct(cpu, over time.Duration) float64 { return 100 * cpu.Seconds() / over.Seconds() }

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// storeURL returns the backend URL of the run: a SQLite file in a new
// temporary directory, the Redis URL with a prefix of the run's own, or
// the PostgreSQL URL with a schema of its own.
func storeURL(o options) (string, func(), error) {
	switch o.backend {
	case "sqlite":
		dir, err := os.MkdirTemp("", "waiters-")
		if err != nil {
			return "", nil, err
		}
		return "sqlite://" + filepath.Join(dir, "waiters.db"), func() { _ = os.RemoveAll(dir) }, nil
	case "redis":
		u, err := url.Parse(o.redisURL)
		if err != nil {
			return "", nil, fmt.Errorf("-redis-url: %w", err)
		}
		prefix := fmt.Sprintf("waiters-%d", time.Now().UnixNano())
		q := u.Query()
		q.Set("prefix", prefix)
		u.RawQuery = q.Encode()
		return u.String(), func() { _ = rediskeys.Delete(context.Background(), o.redisURL, prefix) }, nil
	case "postgres":
		u, err := url.Parse(o.pgURL)
		if err != nil {
			return "", nil, fmt.Errorf("-postgres-url: %w", err)
		}
		schema := fmt.Sprintf("waiters_%d", time.Now().UnixNano())
		q := u.Query()
		q.Set("schema", schema)
		u.RawQuery = q.Encode()
		return u.String(), func() { dropSchema(o.pgURL, schema) }, nil
	}
	return "", nil, fmt.Errorf("-backend must be sqlite, redis or postgres, got %q", o.backend)
}

// dropSchema drops the run's PostgreSQL schema.
func dropSchema(pgURL, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u, err := url.Parse(pgURL)
	if err != nil {
		return
	}
	q := u.Query()
	for _, own := range []string{"schema", "timeout", "listen"} { // pgstate's parameters, not pgx's
		q.Del(own)
	}
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// serve runs the child: a sidecar on storeURL on a loopback port, whose
// MCP URL it prints; it ends when its standard input closes.
func serve(ctx context.Context, storeURL string) error {
	cfg := sidecar.Defaults()
	cfg.Port, cfg.MaxConnections = 0, 1<<14
	cfg.Fair.MaxLongPolls = 0 // every waiter is one client, one tenant: no per-tenant cap on its waits
	switch {
	case strings.HasPrefix(storeURL, "sqlite://"):
		cfg.Backend, cfg.DBPath = sidecar.BackendSQLite, strings.TrimPrefix(storeURL, "sqlite://")
	case strings.HasPrefix(storeURL, "postgres://"):
		cfg.Backend, cfg.DatabaseURL = sidecar.BackendPostgres, storeURL
	default:
		cfg.Backend, cfg.RedisURL = sidecar.BackendRedis, storeURL
	}
	sc, err := sidecar.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer sc.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
	fmt.Println("http://" + ln.Addr().String() + "/mcp")
	return sc.Serve(ctx, ln)
}

// child is the sidecar process.
type child struct {
	cmd   *exec.Cmd
	stdin io.Closer
	url   string
}

func startChild(ctx context.Context, storeURL string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "-serve", storeURL)
	cmd.Stderr = os.Stderr
	stdin, stdout, err := procs.Start(cmd)
	if err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the sidecar did not start: %w", err)
	}
	return &child{cmd: cmd, stdin: stdin, url: strings.TrimSpace(line)}, nil
}

func (c *child) stop() {
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}

// cpu returns the child's CPU time so far: utime+stime of /proc/pid/stat.
func (c *child) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("reading the sidecar's CPU time (Linux only): %w", err)
	}
	// Fields after the command name, which is in parentheses: state is
	// field 3, utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / ticks, nil
}

// cpuOver returns the CPU time the child spends over d.
func (c *child) cpuOver(ctx context.Context, d time.Duration) (time.Duration, error) {
	t0, err := c.cpu()
	if err != nil {
		return 0, err
	}
	if err := sleep(ctx, d); err != nil {
		return 0, err
	}
	t1, err := c.cpu()
	return t1 - t0, err
}

// connect opens one MCP client whose connection pool holds n connections.
func connect(ctx context.Context, mcpURL string, n int) (*client.Client, error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: n, MaxIdleConnsPerHost: n}}
	c, err := client.NewStreamableHttpClient(mcpURL, transport.WithHTTPBasicClient(hc),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		return nil, fmt.Errorf("initialize %s: %w", mcpURL, err)
	}
	return c, nil
}

// call calls a tool and fails on a tool error.
func call(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, args
	res, err := c.CallTool(ctx, req)
	if err == nil && res.IsError {
		err = fmt.Errorf("%s: tool error: %v", name, res.Content)
	}
	return res, err
}

// wait long-polls key for a version above after.
func wait(ctx context.Context, c *client.Client, key string, after int64) (*mcp.CallToolResult, error) {
	return call(ctx, c, "state_wait", map[string]any{"key": key, "after_version": after, "timeout_seconds": 60})
}

// writer returns the function that writes a key to wake its waiter.
func writer(ctx context.Context, o options, c *client.Client, storeURL string) (func(context.Context, string) error, func(), error) {
	if o.writer == "mcp" {
		return func(ctx context.Context, key string) error {
			_, err := call(ctx, c, "state_set", map[string]any{"key": key, "value": 1})
			return err
		}, func() {}, nil
	}
	st, err := state.Open(ctx, storeURL)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, key string) error {
		_, err := st.Set(ctx, key, 1)
		return err
	}, func() { _ = st.Close() }, nil
}
