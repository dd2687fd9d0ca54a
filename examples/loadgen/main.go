// Command loadgen measures what the MCP protocol costs on top of the state
// library: tool calls per second and p50/p99 latency over Streamable HTTP
// with 1, 16 and 64 concurrent clients, beside the same operations called
// in-process on the Store, on memory and on SQLite. The workload alternates
// state_set and state_get (Store.Set and Store.Get) of small JSON objects,
// each worker on its own keys.
//
//	cd examples   # a module of its own
//	go run ./loadgen                               # in-process sidecar, memory and SQLite, a few seconds
//	go run ./loadgen -duration 5s -clients 1,16,64,256
//	go run ./loadgen -backends redis -redis-url redis://127.0.0.1:6379/0
//	go run ./loadgen -url http://127.0.0.1:8000/mcp -token s3cret   # a running sidecar
//	go run ./loadgen -separate -backends sqlite,echo -rounds 5 -store=false -clients 1,64 -duration 3s
//
// By default it starts the real sidecar handler (package sidecar,
// stateless HTTP) on a loopback port in its own process, so client and
// server share the process and the machine's CPUs: the numbers are a ratio
// to read on one machine, not a capacity figure. With -separate each
// server (sidecar or echo) runs in a process of its own, started from
// this program, so that the load generator's work is not the server's:
// the srv/call column then gives the server process's CPU time per call,
// and -server-cpuprofile profiles it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state/sidecar"

	"github.com/statesidecar/state/examples/internal/cli"
)

func main() {
	cli.Main("loadgen", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// options are loadgen's flags.
type options struct {
	url, token       string
	redisURL         string
	postgresURL      string
	cpuProfile       string
	serverProfile    string
	serve            string // the backend to serve (-serve, in a server process)
	workload         string
	separate         bool
	backends         []string
	clients          []int
	rounds           int
	store            bool
	duration, warmup time.Duration
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	fs.StringVar(&o.url, "url", "", "measure a running sidecar at this MCP URL (e.g. http://127.0.0.1:8000/mcp) instead of starting one")
	fs.StringVar(&o.token, "token", "", "bearer token for -url")
	backends := fs.String("backends", "memory,sqlite", "backends of the sidecar, comma-separated: memory, sqlite, redis, postgres; "+
		"echo adds a bare mcp-go server as the yardstick (the ÷echo column)")
	fs.IntVar(&o.rounds, "rounds", 1, "measure every backend this many times, taking turns (for ratios on a busy machine)")
	fs.BoolVar(&o.store, "store", true, "also measure the Store called in-process (the store rows)")
	fs.StringVar(&o.redisURL, "redis-url", "redis://localhost:6379", "Redis URL for -backends redis")
	fs.StringVar(&o.postgresURL, "postgres-url", "postgres://localhost:5432/postgres?sslmode=disable",
		"PostgreSQL URL for -backends postgres (the run uses a schema of its own, dropped afterwards)")
	fs.BoolVar(&o.separate, "separate", false, "run each server (sidecar or echo) in a process of its own, started from this program; "+
		"adds the server's CPU per call (srv/call) and leaves out the store rows")
	fs.StringVar(&o.serverProfile, "server-cpuprofile", "", "with -separate, write a CPU profile of each server process to this file "+
		"with -<backend>-<round>.pprof appended")
	fs.StringVar(&o.serve, serveFlag, "", "(internal) serve this backend on a loopback port, print its URL, and serve until stdin closes")
	clients := fs.String("clients", "1,16,64", "numbers of concurrent clients, comma-separated")
	fs.StringVar(&o.workload, "workload", workloadMixed, "mixed (state_set and state_get alternating), set (state_set only) or claim (workflow_claim of a run of each worker's, "+
		"by the same agent: a heartbeat; the run is created in the warm-up)")
	fs.DurationVar(&o.duration, "duration", 500*time.Millisecond, "measuring time per row")
	fs.DurationVar(&o.warmup, "warmup", 100*time.Millisecond, "unmeasured time before each row")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (client and in-process sidecar) to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for s := range strings.SplitSeq(*clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-clients: %q is not a positive number", s)
		}
		o.clients = append(o.clients, n)
	}
	for s := range strings.SplitSeq(*backends, ",") {
		switch b := strings.TrimSpace(s); b {
		case sidecar.BackendMemory, sidecar.BackendSQLite, sidecar.BackendRedis, sidecar.BackendPostgres, echoName:
			o.backends = append(o.backends, b)
		default:
			return o, fmt.Errorf("-backends: %q is not memory, sqlite, redis, postgres or echo", s)
		}
	}
	if o.serve != "" && !slices.Contains([]string{sidecar.BackendMemory, sidecar.BackendSQLite, sidecar.BackendRedis,
		sidecar.BackendPostgres, echoName}, o.serve) {
		return o, fmt.Errorf("-serve: %q is not memory, sqlite, redis, postgres or echo", o.serve)
	}
	if o.separate {
		o.store = false // the Store lives in the server process
	}
	if o.workload != workloadMixed && o.workload != workloadSet && o.workload != workloadClaim {
		return o, fmt.Errorf("-workload: %q is not mixed, set or claim", o.workload)
	}
	if o.duration <= 0 || o.warmup < 0 || o.rounds < 1 {
		return o, errors.New("-duration and -rounds must be positive and -warmup not negative")
	}
	return o, nil
}

// run measures and prints the table to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.serve != "" {
		return serve(ctx, o, os.Stdin, stdout)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Fprintf(stdout, "loadgen: %s, GOMAXPROCS=%d, %d CPUs; %v per row after %v warm-up; workload: %s\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), o.duration, o.warmup, o.workload)
	var rows []row
	if o.url != "" {
		for _, n := range o.clients {
			r, err := measureMCP(ctx, o, o.url, n, nil)
			if err != nil {
				return err
			}
			rows = append(rows, row{backend: "remote", clients: n, path: "mcp-http", r: r})
		}
		return report(stdout, rows)
	}
	for round := 1; round <= o.rounds; round++ {
		for _, b := range o.backends {
			more, err := measureBackend(ctx, o, b, round)
			if err != nil {
				return err
			}
			rows = append(rows, more...)
		}
	}
	return report(stdout, rows)
}

// measureBackend starts backend b (a sidecar, or the echo server) and
// measures it at every concurrency.
func measureBackend(ctx context.Context, o options, b string, round int) ([]row, error) {
	if o.separate {
		return measureChild(ctx, o, b, round)
	}
	p, err := start(ctx, o, b)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, n := range o.clients {
		var base *result
		if o.store && p.sc != nil {
			r := measure(ctx, n, o.warmup, o.duration, storeCaller(p.sc.Store(), o.workload), nil)
			base = &r
			rows = append(rows, row{backend: b, clients: n, path: "store", r: r, round: round})
		}
		viaMCP, err := measureMCP(ctx, o, p.url, n, nil)
		if err != nil {
			_ = p.close()
			return nil, err
		}
		rows = append(rows, row{backend: b, clients: n, path: "mcp-http", r: viaMCP, base: base, round: round})
	}
	return rows, p.close()
}

// measureChild starts backend b in a server process of its own and
// measures it over MCP at every concurrency, with the server's CPU time.
func measureChild(ctx context.Context, o options, b string, round int) ([]row, error) {
	profile := ""
	if o.serverProfile != "" {
		profile = fmt.Sprintf("%s-%s-%d.pprof", o.serverProfile, b, round)
	}
	c, err := startChild(ctx, o, b, profile)
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, n := range o.clients {
		r, err := measureMCP(ctx, o, c.url, n, c.cpu)
		if err != nil {
			_ = c.stop()
			return nil, err
		}
		rows = append(rows, row{backend: b, clients: n, path: "mcp-http", r: r, round: round})
	}
	if err := c.stop(); err != nil {
		return nil, fmt.Errorf("server process for %s: %w", b, err)
	}
	return rows, nil
}

// measureMCP connects n clients to mcpURL and measures the workload on
// them; srvCPU, if not nil, reads the server process's CPU time.
func measureMCP(ctx context.Context, o options, mcpURL string, n int, srvCPU func() time.Duration) (result, error) {
	clients, closeAll, err := connect(ctx, mcpURL, o.token, n)
	if err != nil {
		return result{}, err
	}
	defer closeAll()
	return measure(ctx, n, o.warmup, o.duration, mcpCaller(clients, o.workload), srvCPU), nil
}
