package mcptasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/statetest"
)

// TestTaskRetention: once its TTL has passed a task leaves nothing in the
// store, on every backend: not its record, listing entry or checkpoint
// (the store's sweeper), not its run (deleted when it finished, or by a
// sweep when its worker died first), and not its history beyond the
// retention. Time is a fake clock.
func TestTaskRetention(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		b = storetest.New(t, b.Name)
		clk := statetest.NewClock()
		st := storetest.Open(t, b.URL, &state.Options{Clock: clk, SweepInterval: -1, SweepGrace: time.Millisecond})
		ts, err := New(st, newMCPServer(), &Options{SweepInterval: -1, Clock: clk, ClaimTTL: 10 * time.Second, MaxTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ts.Close(context.Background()) })
		ctx := context.Background()

		// done: finished by its worker, which died before deleting the run.
		done := mustCreate(t, ts, alice, time.Minute)
		claim, err := ts.st.ClaimRun(ctx, done.Run, "w1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.write(ctx, done, claim.Fence, claim.Attempt, true, func(r *record) { r.Status = StatusCompleted }); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.st.CompleteRun(ctx, done.Run, state.WithFence(claim.Fence)); err != nil {
			t.Fatal(err)
		}
		// lost: created, never run (its creator died), expires unfinished.
		lost := mustCreate(t, ts, alice, time.Minute)
		// ran: finished by a worker that lived: its run goes at once.
		ran := mustCreate(t, ts, bob, time.Minute)
		claim, err = ts.st.ClaimRun(ctx, ran.Run, "w2")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.write(ctx, ran, claim.Fence, claim.Attempt, true, func(r *record) { r.Status = StatusCompleted }); err != nil {
			t.Fatal(err)
		}
		ts.finishRun(ran.Run, state.WithFence(claim.Fence), true)
		if _, err := ts.st.GetRun(ctx, ran.Run); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("the run of a task its worker finished: %v, want it deleted", err)
		}

		// A sweep before expiry deletes the finished run the dead worker
		// left, and starts nothing.
		if err := ts.sweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := ts.st.GetRun(ctx, done.Run); !errors.Is(err, state.ErrNotFound) {
			t.Fatalf("the finished run a dead worker left: %v, want it deleted by the sweep", err)
		}
		if _, err := ts.st.GetRun(ctx, lost.Run); err != nil {
			t.Fatalf("the run of a live task must stay: %v", err)
		}

		// Past the TTL, a sweep takes the lost task's run over, finds no
		// task and deletes the run.
		clk.Advance(2 * time.Minute)
		if err := ts.sweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(wait)
		for {
			_, err := ts.st.GetRun(ctx, lost.Run)
			if errors.Is(err, state.ErrNotFound) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the run of an expired task is still there: %v", err)
			}
			time.Sleep(5 * time.Millisecond)
		}

		// The store's sweep removes the expired entries: only counters stay.
		clk.Advance(time.Minute)
		if _, err := ts.st.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		recs, err := ts.st.Driver().List(ctx, &backend.ListQuery{NS: ts.st.NamespaceName(), Limit: 1000, Now: clk.Now()})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if !strings.HasPrefix(r.Key, backend.CounterPrefix) {
				t.Errorf("left after every task expired: %s", r.Key)
			}
		}
		page, err := ts.st.ListRuns(ctx)
		if err != nil || len(page.Runs) != 0 {
			t.Fatalf("runs left: %v %v", page.Runs, err)
		}

		// History: the tasks' writes leave events (without their values).
		// Past HistoryMaxAge (MaxTTL, an hour, here) the sweep trims
		// them: all but at most 64 just older than the bound (the margin of
		// state.Store.TrimHistory), and the newest entry.
		for range 40 {
			mustCreate(t, ts, alice, time.Minute)
		}
		clk.Advance(2 * time.Minute)
		if err := ts.sweepOnce(ctx); err != nil { // takes the expired tasks' runs over
			t.Fatal(err)
		}
		waitNoRuns(t, ts)
		before, err := ts.st.History(ctx, state.HistoryQuery{Limit: 1000})
		if err != nil || len(before) < 200 {
			t.Fatalf("history before the trim: %d events (want 200 or more), %v", len(before), err)
		}
		// No entry holds a task's content: its writes are private (their
		// events record sizes), so the params and results never reach
		// history at all.
		for _, ev := range before {
			for _, b := range [][]byte{ev.Value, ev.Prev} {
				if strings.Contains(string(b), "arguments") || strings.Contains(string(b), `"owner"`) {
					t.Fatalf("history entry %d (%s %s) holds a task's content: %s", ev.ID, ev.Op, ev.Key, b)
				}
			}
		}
		clk.Advance(time.Hour)
		ts.trimmed = time.Time{} // the last sweep trimmed nothing old yet
		if err := ts.sweepOnce(ctx); err != nil {
			t.Fatal(err)
		}
		after, err := ts.st.History(ctx, state.HistoryQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		old := 0
		for _, ev := range after {
			if clk.Now().Sub(ev.Time) > time.Hour {
				old++
			}
		}
		if old > 65 {
			t.Fatalf("%d of %d history entries older than HistoryMaxAge are left", old, len(before))
		}
	})
}

// waitNoRuns waits until the task namespace has no run left (a sweep's
// takeovers run in goroutines of their own).
func waitNoRuns(t *testing.T, ts *Tasks) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		page, err := ts.st.ListRuns(context.Background())
		if err == nil && len(page.Runs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs left: %v %v", page.Runs, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
