package main

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/examples/internal/procs"
)

// wait bounds the whole story: generous, because the machine may be busy.
// Finishing early is never a failure.
const wait = 3 * time.Minute

func TestMain(m *testing.M) {
	// The orchestrator starts workers and aggregators as "<this binary>
	// worker ..."; in a test, this binary is the test binary.
	if len(os.Args) > 1 && (os.Args[1] == "worker" || os.Args[1] == "aggregate") {
		os.Exit(dispatch(context.Background(), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// The whole story, with short TTLs: fan out, kill a worker mid-item,
// take it over, join.
func TestStory(t *testing.T) {
	const items, workers = 6, 3
	cfg, err := parseFlags([]string{"-items", strconv.Itoa(items), "-workers", strconv.Itoa(workers),
		"-claim-ttl", "3s", "-step-delay", "50ms", "-job", "test"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var transcript strings.Builder
	out, err := orchestrate(ctx, cfg, &transcript)
	t.Log("transcript:\n" + transcript.String())
	if err != nil {
		t.Fatal(err)
	}

	// No process is left running.
	if len(out.PIDs) != workers+2 {
		t.Errorf("%d processes started, want %d workers and 2 aggregators", len(out.PIDs), workers)
	}
	for _, pid := range out.PIDs {
		if !procs.Gone(pid) {
			t.Errorf("pid %d still runs after the orchestrator returned", pid)
		}
	}

	// Every child is done, and in the report exactly once, with the right sum.
	if len(out.Children) != items {
		t.Fatalf("%d children, want %d", len(out.Children), items)
	}
	for _, c := range out.Children {
		if c.Status != "done" {
			t.Errorf("child %s (item %s) is %s, want done", c.RunID, c.Tags["item"], c.Status)
		}
	}
	seen := map[int]int{}
	for _, it := range out.Report.Items {
		seen[it.Item]++
		var want int64
		for s := 1; s <= stepCount; s++ {
			want += stepSum(it.Item, s)
		}
		if it.Sum != want {
			t.Errorf("item %d: sum %d, want %d", it.Item, it.Sum, want)
		}
	}
	for i := range items {
		if seen[i] != 1 {
			t.Errorf("item %d is %d times in the report, want once", i, seen[i])
		}
	}
	if len(out.Report.Items) != items || out.Report.Total != expectedTotal(items) {
		t.Errorf("report: %d items, total %d; want %d items, total %d", len(out.Report.Items), out.Report.Total, items, expectedTotal(items))
	}

	// The killed worker's child was taken over: attempt 2, a higher fence,
	// resumed after the step the killed worker checkpointed.
	k := out.Killed
	if k == nil {
		t.Fatal("no worker stalled, so none was killed")
	}
	fenced := false
	resumed := false
	for _, ev := range out.Events {
		fenced = fenced || ev.Ev == "fenced"
		if ev.Ev == "resumed" && ev.Run == k.Run && ev.Who != k.Who && ev.Step == k.Step {
			resumed = true
		}
	}
	if !resumed {
		t.Errorf("no other worker resumed %s after step %d", k.Run, k.Step)
	}
	for _, c := range out.Children {
		if c.RunID != k.Run {
			continue
		}
		// A worker fenced out because the machine stalled it past its TTL
		// adds attempts; without one, the takeover is attempt 2 exactly.
		if c.Attempt < 2 || !fenced && c.Attempt != 2 {
			t.Errorf("the killed worker's child %s: attempt %d, want 2", c.RunID, c.Attempt)
		}
		if c.Fence == nil || *c.Fence <= k.Fence {
			t.Errorf("the killed worker's child %s: fence %v, want above the killed worker's %d", c.RunID, c.Fence, k.Fence)
		}
		if deref(c.AgentID) == k.Who {
			t.Errorf("the killed worker's child %s was finished by the killed worker %s", c.RunID, k.Who)
		}
	}

	// The parent was claimable only after every child finished: an
	// aggregator's claim was refused while children were open, the
	// winner saw every child done, and the parent's history has the join
	// (the commit of the last child's finish) before any claim.
	var refused, claimed, lost int
	for _, ev := range out.Events {
		switch {
		case ev.Ev == "refused" && strings.HasPrefix(ev.Who, "agg"):
			if ev.Children["done"] < items {
				refused++
			}
		case ev.Ev == "claimed" && strings.HasPrefix(ev.Who, "agg"):
			claimed++
			if ev.Children["done"] != items {
				t.Errorf("%s claimed the parent with children %v, want all %d done", ev.Who, ev.Children, items)
			}
		case ev.Ev == "lost" && strings.HasPrefix(ev.Who, "agg"):
			lost++
		}
	}
	if refused == 0 || claimed != 1 || lost != 1 {
		t.Errorf("aggregators: %d refused while children were open, %d claimed, %d lost; want some, 1, 1", refused, claimed, lost)
	}
	join, claim := -1, -1
	for i, h := range out.History {
		if h.Op == "workflow.join" && join < 0 {
			join = i
		}
		if h.Op == "workflow.claim" && claim < 0 {
			claim = i
		}
	}
	if join < 0 || claim < join {
		t.Errorf("parent history: join at %d, first claim at %d; want a join before any claim: %+v", join, claim, out.History)
	}
}

// A restarted orchestrator (the same job) gets the same runs back.
func TestRestartReplays(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	url, stop, err := startSidecar(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	c, err := dial(ctx, url, "", "test")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	first, err := createFanOut(ctx, c, "again", 3)
	if err != nil {
		t.Fatal(err)
	}
	second, err := createFanOut(ctx, c, "again", 3)
	if err != nil {
		t.Fatal(err)
	}
	if first.Replayed != 0 || second.Replayed != 4 {
		t.Errorf("replayed %d then %d, want 0 then 4", first.Replayed, second.Replayed)
	}
	if second.Parent != first.Parent || strings.Join(second.Children, ",") != strings.Join(first.Children, ",") {
		t.Errorf("second fan-out %+v, want the first's runs %+v", second, first)
	}
	var kids runsResult
	if err := c.call(ctx, "workflow_discover", map[string]any{"parent_run_id": first.Parent}, &kids); err != nil {
		t.Fatal(err)
	}
	if len(kids.Runs) != 3 {
		t.Errorf("the parent has %d children, want 3", len(kids.Runs))
	}
}

// Bad flags name the flag.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-items", "0"}, {"-workers", "1"}, {"-claim-ttl", "1ms"}, {"-step-delay", "10s"}, {"extra"}} {
		_, err := parseFlags(args, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("parseFlags(%v) = %v, want an error naming %s", args, err, args[0])
		}
	}
	if code := dispatch(context.Background(), []string{"worker", "-id", "w"}, func(string) string { return "" },
		strings.NewReader(""), io.Discard, io.Discard); code != 1 {
		t.Errorf("a worker without -sidecar exited %d, want 1", code)
	}
}

// cancelOn is a transcript writer that cancels when a line contains what.
type cancelOn struct {
	what   string
	cancel context.CancelFunc
	b      strings.Builder
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.b.Write(p)
	if strings.Contains(string(p), c.what) {
		c.cancel()
	}
	return len(p), nil
}

// Stopping the orchestrator (Ctrl-C) in the middle stops every process it
// started before it returns.
func TestCancelStopsEveryProcess(t *testing.T) {
	cfg, err := parseFlags([]string{"-claim-ttl", "3s", "-step-delay", "50ms", "-job", "cancel"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	w := &cancelOn{what: "SIGKILL", cancel: cancel}
	out, err := orchestrate(ctx, cfg, w)
	t.Log("transcript:\n" + w.b.String())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("orchestrate = %v, want context.Canceled", err)
	}
	if len(out.PIDs) < 2 {
		t.Fatalf("only %d processes started before the cancel", len(out.PIDs))
	}
	for _, pid := range out.PIDs {
		if !procs.Gone(pid) {
			t.Errorf("pid %d still runs after the orchestrator returned", pid)
		}
	}
}
