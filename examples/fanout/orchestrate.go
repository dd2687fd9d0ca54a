package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// An outcome is what the orchestrator saw: the test checks it.
type outcome struct {
	Fan      fanOut
	Events   []event
	PIDs     []int
	Killed   *event         // the stalled worker's last event before its SIGKILL
	Children []runInfo      // every child, as it is at the end
	History  []historyEntry // the parent's history, oldest first
	Report   *report
}

// orchestrate runs the story: fan the job out, start the workers and the
// aggregators, kill one worker in the middle of an item, wait for every
// process to exit, and print the transcript and the joined result.
func orchestrate(ctx context.Context, cfg config, stdout io.Writer) (*outcome, error) {
	t0 := time.Now()
	say := func(who, format string, a ...any) {
		fmt.Fprintf(stdout, "%6.2fs  %-12s %s\n", time.Since(t0).Seconds(), who, fmt.Sprintf(format, a...))
	}
	if cfg.Sidecar == "" {
		dir, err := os.MkdirTemp("", "fanout-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		url, stop, err := startSidecar(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("starting a sidecar: %w", err)
		}
		defer func() { _ = stop() }()
		cfg.Sidecar = url
		say("orchestrator", "started a sidecar on SQLite at %s/mcp", url)
	}
	c, err := dial(ctx, cfg.Sidecar, cfg.Token, "fanout-orchestrator")
	if err != nil {
		return nil, err
	}
	defer c.Close()
	out := &outcome{}
	if out.Fan, err = createFanOut(ctx, c, cfg.Job, cfg.Items); err != nil {
		return nil, err
	}
	say("orchestrator", "job %s: join parent %s with %d children (idempotency keys fanout/%s/...; %d replayed)",
		cfg.Job, out.Fan.Parent, len(out.Fan.Children), cfg.Job, out.Fan.Replayed)
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := runProcs(ctx, cfg, exe, out, say); err != nil {
		return out, err
	}
	return out, finish(ctx, c, cfg, out, say)
}

// runProcs starts the processes, follows their events and kills the
// staller; it returns once every process has exited.
func runProcs(ctx context.Context, cfg config, exe string, out *outcome, say func(who, format string, a ...any)) error {
	events := make(chan event)
	procs := map[string]*proc{}
	common := []string{"-sidecar", cfg.Sidecar, "-job", cfg.Job, "-parent", out.Fan.Parent}
	start := func(id string, args ...string) error {
		p, err := startProc(exe, id, args, events)
		if err != nil {
			return err
		}
		procs[id] = p
		out.PIDs = append(out.PIDs, p.cmd.Process.Pid)
		say(id, "started (pid %d)", p.cmd.Process.Pid)
		return nil
	}
	worker := func(i int, extra ...string) error {
		return start("w"+strconv.Itoa(i), append(append([]string{"worker", "-id", "w" + strconv.Itoa(i),
			"-claim-ttl", cfg.ClaimTTL.String(), "-step-delay", cfg.StepDelay.String()}, common...), extra...)...)
	}
	rest := false
	startRest := func() error {
		rest = true
		first := 1
		if cfg.Kill {
			first = 2
		}
		for i := first; i <= cfg.Workers; i++ {
			if err := worker(i); err != nil {
				return err
			}
		}
		for _, id := range []string{"agg1", "agg2"} {
			if err := start(id, append([]string{"aggregate", "-id", id}, common...)...); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cfg.Kill {
		// w1 starts alone and stalls after step 2 of its first item, so the
		// kill always lands in the middle of an item.
		err = worker(1, "-stall-after", "2")
	} else {
		err = startRest()
	}
	for err == nil && len(procs) > 0 {
		var ev event
		select {
		case ev = <-events:
		case <-ctx.Done():
			err = ctx.Err()
			continue
		}
		ev.At = time.Now()
		out.Events = append(out.Events, ev)
		say(ev.Who, "%s", ev.Msg)
		switch {
		case ev.Ev == "exit":
			delete(procs, ev.Who)
			if !rest {
				err = startRest()
			}
		case ev.Ev == "claimed" && !rest:
			err = startRest()
		case ev.Ev == "stalled":
			k := ev
			out.Killed = &k
			say("orchestrator", "SIGKILL %s (pid %d): it holds item %s at step %d with fence %d; its claim expires within %s",
				ev.Who, ev.PID, ev.Item, ev.Step, ev.Fence, cfg.ClaimTTL)
			_ = procs[ev.Who].cmd.Process.Kill()
		}
	}
	if err != nil { // stop whatever still runs, and wait for it
		say("orchestrator", "stopping %d processes (%v)", len(procs), err)
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
		}
		for len(procs) > 0 {
			ev := <-events
			if ev.Ev == "exit" {
				delete(procs, ev.Who)
			}
		}
	}
	return err
}

// finish reads the end state: the children, the parent's history and the
// report, and prints the result.
func finish(ctx context.Context, c *sidecarClient, cfg config, out *outcome, say func(who, format string, a ...any)) error {
	var kids runsResult
	if err := c.call(ctx, "workflow_discover", map[string]any{"parent_run_id": out.Fan.Parent, "limit": 1000}, &kids); err != nil {
		return err
	}
	out.Children = kids.Runs
	var h historyResult
	if err := c.call(ctx, "history_log", map[string]any{"key": out.Fan.Parent, "n": 1000}, &h); err != nil {
		return err
	}
	for i := len(h.Entries) - 1; i >= 0; i-- {
		out.History = append(out.History, h.Entries[i])
	}
	var got getResult
	if err := c.call(ctx, "state_get", map[string]any{"key": reportKey(cfg.Job)}, &got); err != nil {
		return err
	}
	if !got.Found {
		return fmt.Errorf("no report at %s: the aggregation did not finish", reportKey(cfg.Job))
	}
	out.Report = &report{}
	if err := json.Unmarshal(got.Value, out.Report); err != nil {
		return fmt.Errorf("the report at %s: %w", reportKey(cfg.Job), err)
	}
	say("orchestrator", "every process has exited; the report (%s):", reportKey(cfg.Job))
	for _, it := range out.Report.Items {
		say("", "item %-3d sum %-10d by %s, attempt %d, fence %d", it.Item, it.Sum, it.By, it.Attempt, it.Fence)
	}
	verdict := "correct"
	if out.Report.Total != out.Report.Expected {
		verdict = "WRONG"
	}
	say("", "total %d, expected %d: %s (joined by %s)", out.Report.Total, out.Report.Expected, verdict, out.Report.By)
	if out.Report.Total != out.Report.Expected {
		return fmt.Errorf("the total %d is not the expected %d", out.Report.Total, out.Report.Expected)
	}
	return nil
}
