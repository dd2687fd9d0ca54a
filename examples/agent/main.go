// Command agent shows the state library used in-process against SQLite, the
// way a Go agent binary embeds it: an orchestrator creates a workflow run,
// worker A claims it and checkpoints two steps, then crashes on purpose (a
// real process exit, no cleanup); once A's claim expires, worker B claims the
// run, resumes after A's last checkpoint and finishes it.
//
//	cd examples   # a module of its own
//	go run ./agent [-db agent-demo.db] [-claim-ttl 2s]
//
// Every worker is a separate process over the same database file.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/sqlitestate"
)

// Environment variables that make the program play a worker.
const (
	roleEnv  = "AGENT_DEMO_ROLE"
	dbEnv    = "AGENT_DEMO_DB"
	runEnv   = "AGENT_DEMO_RUN"
	ttlEnv   = "AGENT_DEMO_CLAIM_TTL"
	crashed  = 3 // worker A's exit code
	lastStep = 4
)

func main() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(worker(role))
	}
	db := flag.String("db", filepath.Join(os.TempDir(), "agent-demo.db"), "SQLite database file")
	ttl := flag.Duration("claim-ttl", 2*time.Second, "how long a claim lives without a heartbeat")
	flag.Parse()
	if err := demo(context.Background(), os.Stdout, *db, *ttl, os.Args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func open(ctx context.Context, db string) (*state.Store, error) {
	abs, err := filepath.Abs(db)
	if err != nil {
		return nil, err
	}
	return state.Open(ctx, "sqlite://"+abs)
}

// demo runs the whole story, starting workers as processes of exe.
func demo(ctx context.Context, out io.Writer, db string, ttl time.Duration, exe string) error {
	st, err := open(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()

	run, err := st.CreateRun(ctx, "pr-review-42", map[string]string{"pipeline": "pr-review", "pr": "42"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orchestrator: created %s\n", run.ID)

	code, err := startWorker(ctx, out, exe, "A", db, run.ID, ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orchestrator: worker A exited with code %d\n", code)
	if code != crashed {
		return fmt.Errorf("worker A should have crashed, exited %d", code)
	}

	// Wait until A's claim has expired and the run is claimable again.
	for {
		r, err := st.GetRun(ctx, run.ID)
		if err != nil {
			return err
		}
		if r.Claimable {
			fmt.Fprintf(out, "orchestrator: %s is claimable again (status %s, last step %d)\n", r.ID, r.Status, r.LastStep)
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(r.ClaimExpiresAt) + 10*time.Millisecond):
		}
	}

	if code, err := startWorker(ctx, out, exe, "B", db, run.ID, ttl); err != nil || code != 0 {
		return fmt.Errorf("worker B: exit %d: %v", code, err)
	}

	res, err := st.ResumeRun(ctx, run.ID)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "orchestrator: %s is %s after %d attempts; outputs:\n", run.ID, res.Run.Status, res.Run.Attempt)
	for _, o := range res.Outputs {
		fmt.Fprintf(out, "  step %d: %s\n", o.Step, o.Output)
	}
	return nil
}

// startWorker runs a worker process and returns its exit code.
func startWorker(ctx context.Context, out io.Writer, exe, name, db, runID string, ttl time.Duration) (int, error) {
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), roleEnv+"="+name, dbEnv+"="+db, runEnv+"="+runID, ttlEnv+"="+ttl.String())
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

// worker plays worker A (crashes after two steps) or B (resumes, finishes).
func worker(name string) int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintf(os.Stderr, "worker %s: %v\n", name, err); return 1 }
	st, err := open(ctx, os.Getenv(dbEnv))
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	runID := os.Getenv(runEnv)
	ttl, err := time.ParseDuration(os.Getenv(ttlEnv))
	if err != nil {
		return fail(err)
	}
	agent := "worker-" + name
	claim, err := st.ClaimRun(ctx, runID, agent, state.WithClaimTTL(ttl))
	if err != nil {
		return fail(err)
	}
	res, err := st.ResumeRun(ctx, runID)
	if err != nil {
		return fail(err)
	}
	fmt.Printf("%s: claimed %s (attempt %d, fence %d), resuming after step %d\n", agent, runID, claim.Attempt, claim.Fence, res.LastStep)
	for step := res.LastStep + 1; step <= lastStep; step++ {
		out, _ := json.Marshal(map[string]string{"by": agent, "result": "step " + strconv.FormatInt(step, 10) + " done"})
		opts := []state.CheckpointOption{state.WithAgent(agent), state.WithFence(claim.Fence)}
		if step == lastStep {
			opts = append(opts, state.WithStatus(state.StatusDone))
		}
		if _, err := st.CheckpointRun(ctx, runID, step, json.RawMessage(out), opts...); err != nil {
			return fail(err)
		}
		fmt.Printf("%s: checkpointed step %d\n", agent, step)
		if name == "A" && step == 2 {
			fmt.Printf("%s: crashing now, without releasing the claim\n", agent)
			os.Exit(crashed) // a crash: no deferred cleanup runs
		}
	}
	return 0
}
