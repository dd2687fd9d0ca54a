package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/statesidecar/state/examples/prreview/review"
)

// countingCaller counts the tool calls made through it.
type countingCaller struct {
	c     *mcpClient
	mu    sync.Mutex
	calls map[string]int
}

func (cc *countingCaller) callInto(ctx context.Context, tool string, args map[string]any, out any) error {
	cc.mu.Lock()
	cc.calls[tool]++
	cc.mu.Unlock()
	return cc.c.callInto(ctx, tool, args, out)
}

// The review run is a join parent: it waits, unclaimable, while a review
// is open, and the aggregator's wait is a long-poll that the last review's
// finish ends, not a polling loop.
func TestJoinParentReleasesTheAggregator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sc, err := startSidecar(ctx, t.TempDir(), 0, "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := sc.stop(); err != nil {
			t.Error(err)
		}
	}()
	c, _ := newMCPClient(sc.URL, "", "test")
	defer c.Close()
	p, err := createPipeline(ctx, c, "join-test", review.PR{Repo: "o/r", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Status   string           `json:"status"`
		Join     bool             `json:"join"`
		Children map[string]int64 `json:"children"`
	}
	if err := c.callInto(ctx, "workflow_status", map[string]any{"run_id": p.Parent}, &st); err != nil {
		t.Fatal(err)
	}
	if st.Status != "waiting" || !st.Join || st.Children["created"] != 3 {
		t.Fatalf("the review run after registering: %+v, want a waiting join parent with 3 created children", st)
	}
	if got, err := openReview(ctx, c, "join-test"); err != nil || got == nil || got.RunID != p.Parent {
		t.Fatalf("openReview = %+v, %v; want %s", got, err, p.Parent)
	}

	cc := &countingCaller{c: c, calls: map[string]int{}}
	var progress [][]string
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		runs, err := awaitReviews(ctx, cc, p.Parent, func(open []string) {
			progress = append(progress, open)
			if len(progress) == 1 {
				close(started)
			}
		})
		if err == nil && len(runs) != 3 {
			t.Errorf("awaitReviews returned %d reviews, want 3", len(runs))
		}
		done <- err
	}()
	// Finish the reviews one by one once the waiter has reported them open.
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("awaitReviews returned before any review finished: %v", err)
	}
	for i, kind := range review.Kinds {
		if i == len(review.Kinds)-1 {
			var cl claimResult
			if err := c.callInto(ctx, "workflow_claim", map[string]any{"run_id": p.Parent, "agent_id": "early"}, &cl); err != nil || cl.Claimed {
				t.Fatalf("claiming the review run with a review open: %+v, %v; want refused", cl, err)
			}
		}
		if err := c.callInto(ctx, "workflow_checkpoint", map[string]any{"run_id": p.Children[kind], "step": 1,
			"output": map[string]any{}, "status": "done"}, &struct{}{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(progress[0], "Style (not started)") {
		t.Errorf("progress %v, want the open reviews first", progress)
	}
	// One discovery per wake-up at most: no polling.
	if cc.calls["workflow_wait"] == 0 || cc.calls["workflow_discover"] > cc.calls["workflow_wait"]+1 || cc.calls["workflow_status"] > 0 {
		t.Errorf("calls %v: want workflow_wait long-polls and no status polling", cc.calls)
	}
	var cl claimResult
	if err := c.callInto(ctx, "workflow_claim", map[string]any{"run_id": p.Parent, "agent_id": "aggregator"}, &cl); err != nil || !cl.Claimed {
		t.Errorf("claiming the released review run: %+v, %v", cl, err)
	}
}
