// Command fanout is the fan-out / fan-in example of the State Sidecar: an
// orchestrator fans a job out to worker processes that coordinate only
// through the sidecar's MCP tools, one worker is killed in the middle of
// its item, another takes the item over from its last checkpoint, and an
// aggregator joins the results once every item is done.
//
//	cd examples   # a module of its own
//	go run ./fanout                    # its own SQLite sidecar in a temporary directory
//	go run ./fanout -sidecar http://127.0.0.1:8000   # a running sidecar (token: FANOUT_SIDECAR_TOKEN)
//
// The orchestrator creates a join parent (workflow_create join=true) and a
// child per item (parent_run_id), each with an idempotency key, then starts
// the workers and two aggregators as processes of this same program
// ("fanout worker ...", "fanout aggregate ..."). They speak MCP over
// Streamable HTTP to the sidecar and print JSON lines, which the
// orchestrator prints as a transcript.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := dispatch(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// dispatch runs the orchestrator or, as its first argument says, a worker
// or an aggregator, and returns the exit code. A worker or aggregator also
// stops when its stdin closes: the orchestrator that started it is gone.
func dispatch(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	var err error
	sub := len(args) > 0 && (args[0] == "worker" || args[0] == "aggregate")
	if sub {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() { _, _ = io.Copy(io.Discard, stdin); cancel() }()
	}
	switch {
	case sub && args[0] == "worker":
		err = workerMain(ctx, args[1:], getenv, stdout, stderr)
	case sub:
		err = aggregatorMain(ctx, args[1:], getenv, stdout, stderr)
	default:
		var cfg config
		if cfg, err = parseFlags(args, getenv, stderr); err == nil {
			_, err = orchestrate(ctx, cfg, stdout)
		}
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2
	}
	fmt.Fprintln(stderr, "fanout:", err)
	return 1
}

// config is the orchestrator's configuration.
type config struct {
	Sidecar, Token, Job string
	Items, Workers      int
	ClaimTTL, StepDelay time.Duration
	Kill                bool
}

func parseFlags(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	c := config{Token: getenv("FANOUT_SIDECAR_TOKEN")}
	fs := flag.NewFlagSet("fanout", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Sidecar, "sidecar", getenv("FANOUT_SIDECAR"), "URL of a running sidecar (env FANOUT_SIDECAR, token FANOUT_SIDECAR_TOKEN); empty: start one on SQLite")
	fs.StringVar(&c.Job, "job", "", "job name: runs and keys are named after it; the same name again replays the same runs (default: a new one)")
	fs.IntVar(&c.Items, "items", 6, "number of items (child runs)")
	fs.IntVar(&c.Workers, "workers", 3, "number of worker processes")
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", 3*time.Second, "workers' claim TTL: how soon a killed worker's item is taken over")
	fs.DurationVar(&c.StepDelay, "step-delay", 300*time.Millisecond, "time each step of an item takes")
	fs.BoolVar(&c.Kill, "kill", true, "kill the first worker (SIGKILL) in the middle of its first item")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case fs.NArg() > 0:
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.Items < 1 || c.Items > 1000:
		return c, fmt.Errorf("-items %d: want 1 to 1000", c.Items)
	case c.Workers < 1 || c.Workers > 50:
		return c, fmt.Errorf("-workers %d: want 1 to 50", c.Workers)
	case c.Kill && c.Workers < 2:
		return c, errors.New("-kill needs -workers 2 or more: someone must take the killed worker's item over")
	case c.ClaimTTL < 500*time.Millisecond || c.ClaimTTL > time.Hour:
		return c, fmt.Errorf("-claim-ttl %s: want 500ms to 1h", c.ClaimTTL)
	case c.StepDelay < 0 || c.StepDelay > c.ClaimTTL/2:
		return c, fmt.Errorf("-step-delay %s: want 0 to half the claim TTL (each step is a heartbeat)", c.StepDelay)
	}
	if c.Job == "" {
		c.Job = fmt.Sprintf("job-%d", time.Now().UnixMilli()%1e8)
	}
	return c, nil
}

// workerMain is the "fanout worker" subcommand.
func workerMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c workerConfig
	fs := c.flagSet("worker", stderr)
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", 3*time.Second, "claim TTL")
	fs.DurationVar(&c.StepDelay, "step-delay", 300*time.Millisecond, "time each step takes")
	fs.Int64Var(&c.StallAfter, "stall-after", 0, "stall, holding the claim, after checkpointing this step (0: never): the orchestrator kills it there")
	cl, err := c.connect(ctx, fs, args, getenv)
	if err != nil {
		return err
	}
	defer cl.Close()
	w := &worker{cfg: c, c: cl, out: &emitter{w: stdout, who: c.ID}}
	return w.run(ctx)
}

// aggregatorMain is the "fanout aggregate" subcommand.
func aggregatorMain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var c aggregatorConfig
	cl, err := c.connect(ctx, c.flagSet("aggregate", stderr), args, getenv)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := &aggregator{cfg: c, c: cl, out: &emitter{w: stdout, who: c.ID}}
	return a.run(ctx)
}

// agentFlags are the flags the worker and the aggregator share.
type agentFlags struct {
	Sidecar, ID, Job, Parent string
}

// flagSet returns the flags of the subcommand name, set into f.
func (f *agentFlags) flagSet(name string, usage io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("fanout "+name, flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&f.Sidecar, "sidecar", "", "sidecar URL (token: env FANOUT_SIDECAR_TOKEN)")
	fs.StringVar(&f.ID, "id", name, "agent id")
	fs.StringVar(&f.Job, "job", "", "job name")
	fs.StringVar(&f.Parent, "parent", "", "the job's join parent run id")
	return fs
}

// connect parses a subcommand's flags, checks the required ones and
// connects to the sidecar as "fanout-<id>".
func (f *agentFlags) connect(ctx context.Context, fs *flag.FlagSet, args []string, getenv func(string) string) (*sidecarClient, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if f.Sidecar == "" || f.Job == "" || f.Parent == "" {
		return nil, errors.New("-sidecar, -job and -parent are required")
	}
	return dial(ctx, f.Sidecar, getenv("FANOUT_SIDECAR_TOKEN"), "fanout-"+f.ID)
}
