package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"

	"github.com/statesidecar/state/examples/internal/pause"
)

// Exit codes of an agent process.
const (
	exitOK        = 0 // finished its work, lost a race, or found nothing to do
	exitError     = 1 // the sidecar failed it, or bad flags
	exitFencedOut = 2 // its claim was taken over: it stopped without writing
	exitOrphaned  = 3 // the dashboard that started it went away
)

// agentConfig is what an agent process is told on its command line; the
// bearer token comes from the environment so that ps does not show it.
type agentConfig struct {
	Kind, Sidecar, Token, ID, Demo string
	ClaimTTL, StepDelay, Standby   time.Duration
	Barrier, ExitOnEOF             bool
}

// agentPrefix shortens a kind for agent ids.
var agentPrefix = map[string]string{review.Security: "sec", review.Performance: "perf", review.Style: "style", kindAggregator: "agg"}

// newAgentID returns a fresh agent id for kind, such as "sec-3f2a".
func newAgentID(kind, lang string) string {
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	p := agentPrefix[kind]
	if lang != "" && lang != "go" {
		p += "-" + lang
	}
	return p + "-" + hex.EncodeToString(b)
}

// parseAgentFlags reads an agent's command line.
func parseAgentFlags(args []string, getenv func(string) string, usage io.Writer) (agentConfig, error) {
	var c agentConfig
	fs := flag.NewFlagSet("prreview agent", flag.ContinueOnError)
	fs.SetOutput(usage)
	fs.StringVar(&c.Kind, "kind", "", "security, performance, style or aggregator")
	fs.StringVar(&c.Sidecar, "sidecar", getenv("PRREVIEW_SIDECAR"), "sidecar URL (env PRREVIEW_SIDECAR); the token is PRREVIEW_SIDECAR_TOKEN")
	fs.StringVar(&c.ID, "id", "", "agent id (default: the kind and 4 random hex digits)")
	fs.StringVar(&c.Demo, "demo", "", "the demo tag value the dashboard registered its runs with")
	fs.DurationVar(&c.ClaimTTL, "claim-ttl", 5*time.Second, "claim TTL: how long a crashed agent's claim blocks a successor")
	fs.DurationVar(&c.StepDelay, "step-delay", 1200*time.Millisecond, "time each review step takes (so people can watch)")
	fs.DurationVar(&c.Standby, "standby", 2*time.Minute, "how long to stand by for a run another agent holds")
	fs.BoolVar(&c.Barrier, "barrier", false, `after discovery, print a "ready" line and wait for "go" on stdin (race test)`)
	fs.BoolVar(&c.ExitOnEOF, "exit-on-stdin-eof", false, "exit when stdin closes (the dashboard went away)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.Token = getenv("PRREVIEW_SIDECAR_TOKEN")
	switch {
	case !validKind(c.Kind):
		return c, fmt.Errorf("-kind %q: want security, performance, style or aggregator", c.Kind)
	case c.Sidecar == "":
		return c, errors.New("-sidecar is required (or PRREVIEW_SIDECAR)")
	case c.Demo == "":
		return c, errors.New("-demo is required: the dashboard's demo tag")
	case c.ClaimTTL <= 0 || c.StepDelay < 0 || c.Standby < 0:
		return c, errors.New("-claim-ttl must be positive, -step-delay and -standby not negative")
	}
	if _, err := endpointOf(c.Sidecar); err != nil {
		return c, err
	}
	if c.ID == "" {
		c.ID = newAgentID(c.Kind, "go")
	}
	return c, nil
}

// agentMain is the "prreview agent" subcommand: one reviewer (or the
// aggregator) as its own process, talking MCP to the sidecar and nothing
// else, and reporting on stdout.
func agentMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseAgentFlags(args, os.Getenv, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, "prreview agent:", err)
		}
		return exitError
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, _ := newMCPClient(cfg.Sidecar, cfg.Token, "prreview-"+cfg.ID)
	defer c.Close()
	a := &agent{cfg: cfg, c: c, out: &emitter{w: stdout, agent: cfg.ID, kind: cfg.Kind, lang: "go"}, goCh: make(chan struct{})}
	go a.readStdin(stdin)
	if cfg.Kind == kindAggregator {
		return a.aggregate(ctx)
	}
	return a.review(ctx)
}

// An agent is one running reviewer or aggregator.
type agent struct {
	cfg  agentConfig
	c    *mcpClient
	out  *emitter
	goCh chan struct{}

	run      string // the claimed run
	fence    int64  // its claim's fence
	lastBeat time.Time
}

// readStdin waits for the race barrier's "go" and, if asked, exits when
// the dashboard closes stdin.
func (a *agent) readStdin(r io.Reader) {
	sc := bufio.NewScanner(r)
	released := false
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "go" && !released {
			close(a.goCh)
			released = true
		}
	}
	if a.cfg.ExitOnEOF {
		a.out.event("orphaned", "the dashboard went away: exiting", nil)
		os.Exit(exitOrphaned)
	}
}

// callInto calls a tool and logs the call as a "tool" line.
func (a *agent) callInto(ctx context.Context, tool string, args map[string]any, out any) error {
	start := time.Now()
	raw, err := a.c.call(ctx, tool, args)
	l := line{Type: "tool", Tool: tool, Args: shortenArgs(args), MS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		l.Error = err.Error()
	} else {
		l.Result = abbreviate(raw)
	}
	a.out.write(l)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: unexpected result: %w", tool, err)
	}
	return nil
}

func shortenArgs(args map[string]any) any {
	b, err := json.Marshal(args)
	if err != nil {
		return args
	}
	return abbreviate(b)
}

// fail reports an error event and returns exitError.
func (a *agent) fail(what string, err error) int {
	a.out.event("error", what+": "+err.Error(), nil)
	return exitError
}

// find discovers a claimable run by tags. Behind the race barrier it
// reports "ready" after the first discovery and waits for "go". When the
// run is held by a live claim, it stands by until that claim expires (a
// crashed holder's claim does; a live holder's heartbeats extend it). It
// returns nil when there is nothing to do.
func (a *agent) find(ctx context.Context, tags map[string]any, what string) (*runInfo, error) {
	deadline := time.Now().Add(a.cfg.Standby)
	barrier := a.cfg.Barrier
	for {
		var claimable runsResult
		if err := a.callInto(ctx, "workflow_discover", map[string]any{"tags": tags, "claimable": true}, &claimable); err != nil {
			return nil, err
		}
		if barrier {
			a.out.write(line{Type: "ready", Data: map[string]any{"found": len(claimable.Runs)}})
			select {
			case <-a.goCh:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			barrier = false
		}
		if len(claimable.Runs) > 0 {
			r := claimable.Runs[0]
			a.out.event("discovered", fmt.Sprintf("found %s %s (status %s)", what, r.RunID, r.Status),
				map[string]any{"run_id": r.RunID, "status": r.Status, "attempt": r.Attempt})
			return &r, nil
		}
		var all runsResult
		if err := a.callInto(ctx, "workflow_discover", map[string]any{"tags": tags}, &all); err != nil {
			return nil, err
		}
		var held *runInfo
		for i, r := range all.Runs {
			if (r.Status == "claimed" || r.Status == "running") && r.ClaimExpiresAt != nil {
				held = &all.Runs[i]
				break
			}
		}
		if held == nil {
			msg := "nothing to do: no " + what + " is waiting"
			if len(all.Runs) > 0 {
				msg = fmt.Sprintf("nothing to do: %s %s is already %s", what, all.Runs[0].RunID, all.Runs[0].Status)
			}
			a.out.event("idle", msg, nil)
			return nil, nil
		}
		until := fromEpoch(*held.ClaimExpiresAt)
		if time.Now().After(deadline) {
			a.out.event("idle", fmt.Sprintf("gave up standing by: %s is still held by %s", held.RunID, deref(held.AgentID)), nil)
			return nil, nil
		}
		a.out.event("standby", fmt.Sprintf("%s is held by %s until its claim expires at %s: standing by",
			held.RunID, deref(held.AgentID), until.Format("15:04:05.000")),
			map[string]any{"run_id": held.RunID, "holder": deref(held.AgentID), "until": *held.ClaimExpiresAt})
		wait := time.Until(until) + 50*time.Millisecond
		if d := time.Until(deadline); wait > d {
			wait = d
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(max(wait, 50*time.Millisecond)):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// findAndClaim finds a claimable run by tags (find) and claims it. It
// returns the run's id, or "" and the exit code when there is nothing to do
// (exitOK: no run, or another agent won it) or it failed (exitError,
// reported as failing to do findWhat or the claim).
func (a *agent) findAndClaim(ctx context.Context, tags map[string]any, what, findWhat string) (string, int) {
	run, err := a.find(ctx, tags, what)
	if err != nil {
		return "", a.fail(findWhat, err)
	}
	if run == nil {
		return "", exitOK
	}
	won, err := a.claim(ctx, run.RunID)
	if err != nil {
		return "", a.fail("claiming "+run.RunID, err)
	}
	if !won {
		return "", exitOK
	}
	return run.RunID, exitOK
}

// claim claims run. It reports "claimed" or, having lost, "lost" with the
// sidecar's reason, and returns whether it won.
func (a *agent) claim(ctx context.Context, run string) (bool, error) {
	var res claimResult
	err := a.callInto(ctx, "workflow_claim", map[string]any{"run_id": run, "agent_id": a.cfg.ID,
		"claim_ttl_seconds": a.cfg.ClaimTTL.Seconds()}, &res)
	if err != nil {
		return false, err
	}
	if !res.Claimed {
		a.out.event("lost", "lost the claim: "+deref(res.Reason), map[string]any{"run_id": run, "reason": deref(res.Reason)})
		return false, nil
	}
	a.run, a.fence, a.lastBeat = run, *res.Fence, time.Now()
	a.out.event("claimed", fmt.Sprintf("claimed %s (attempt %d, fence %d)", run, *res.Attempt, *res.Fence),
		map[string]any{"run_id": run, "attempt": *res.Attempt, "fence": *res.Fence, "expires_at": res.ExpiresAt})
	return true, nil
}

// errFencedOut means the agent's claim was taken over.
var errFencedOut = errors.New("fenced out")

// work spends the step's time, heartbeating the claim (workflow_claim by
// the holder) whenever a third of its TTL has passed without one.
func (a *agent) work(ctx context.Context) error {
	end := time.Now().Add(a.cfg.StepDelay)
	for {
		next := a.lastBeat.Add(a.cfg.ClaimTTL / 3)
		if !next.Before(end) {
			break
		}
		if err := pause.Sleep(ctx, time.Until(next)); err != nil {
			return err
		}
		if time.Since(a.lastBeat) >= a.cfg.ClaimTTL {
			// The process was stopped past its claim's TTL (Freeze: SIGSTOP
			// then SIGCONT, as a long GC pause or a suspended VM does). A
			// zombie does not know it lost the claim: it goes on to write
			// its step with its old fence, which the sidecar refuses.
			return nil
		}
		var res claimResult
		err := a.callInto(ctx, "workflow_claim", map[string]any{"run_id": a.run, "agent_id": a.cfg.ID,
			"claim_ttl_seconds": a.cfg.ClaimTTL.Seconds()}, &res)
		if err != nil {
			return err
		}
		if !res.Claimed {
			return fmt.Errorf("%w: heartbeat refused: %s", errFencedOut, deref(res.Reason))
		}
		a.lastBeat = time.Now()
	}
	return pause.Sleep(ctx, time.Until(end))
}

// checkpoint saves a step with the agent's id and fence (a heartbeat too).
// A refusal means the claim was taken over: errFencedOut.
func (a *agent) checkpoint(ctx context.Context, step int64, output any, done bool) error {
	args := map[string]any{"run_id": a.run, "step": step, "output": output, "agent_id": a.cfg.ID, "fence": a.fence}
	if done {
		args["status"] = "done"
	}
	err := a.callInto(ctx, "workflow_checkpoint", args, nil)
	var te *toolError
	if errors.As(err, &te) {
		return fmt.Errorf("%w: %s", errFencedOut, te.Msg)
	}
	if err == nil {
		a.lastBeat = time.Now()
	}
	return err
}

// stopped turns an error of the working phase into an exit code.
func (a *agent) stopped(err error) int {
	switch {
	case errors.Is(err, errFencedOut):
		a.out.event("fenced_out", "stopped without writing: "+err.Error(), map[string]any{"run_id": a.run, "fence": a.fence})
		return exitFencedOut
	case errors.Is(err, context.Canceled):
		a.out.event("stopped", "stopped by a signal", nil)
		return exitError
	}
	return a.fail("working on "+a.run, err)
}
