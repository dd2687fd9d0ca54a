package mcptasks

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/storetest"
)

// events counts the Events a Tasks reports.
type events struct {
	mu sync.Mutex
	n  map[Event]int
}

func (e *events) observe(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.n == nil {
		e.n = map[Event]int{}
	}
	e.n[ev]++
}

func (e *events) count(ev Event) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[ev]
}

// TestReplicas runs tasks across two replicas over one store on every
// backend: a task created on one is polled on the other; the replica running
// it dies and the other takes it over (attempt 2, from its checkpoint); a
// cancel on one reaches the call running on the other; a graceful stop
// hands the task over at once.
func TestReplicas(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		t.Run("kill", func(t *testing.T) { testKill(t, storetest.New(t, b.Name)) })
		t.Run("cancel from the other", func(t *testing.T) { testCrossCancel(t, storetest.New(t, b.Name)) })
		t.Run("graceful stop hands over", func(t *testing.T) { testHandOver(t, storetest.New(t, b.Name)) })
	})
}

// replicas starts two replicas over location b, each with a store of its
// own where the backend is shared.
func replicas(t *testing.T, b storetest.Backend, g *gate, o Options) (*replica, *replica, *events, *events) {
	ea, eb := &events{}, &events{}
	oa, ob := o, o
	oa.Observe, ob.Observe = ea.observe, eb.observe
	sa := openStore(t, b)
	sb := sa
	if b.Shared {
		sb = openStore(t, b)
	}
	return newReplica(t, sa, g, &oa), newReplica(t, sb, g, &ob), ea, eb
}

func testKill(t *testing.T, b storetest.Backend) {
	for _, c := range []*client{legacyClient(t, "alice"), modernClient(t, "alice")} {
		// A fresh location per era: no replica of the other era's round
		// may take the task.
		loc := storetest.New(t, b.Name)
		g := newGate()
		a, bb, _, eb := replicas(t, loc, g, Options{ClaimTTL: 600 * time.Millisecond, SweepInterval: 100 * time.Millisecond})
		id := c.create(a.url, "slow", nil)
		g.waitStarted(t, 1)
		if got := c.get(bb.url, id); got["status"] != "working" {
			t.Fatalf("polled on the other replica: %v", got)
		}
		if a.tasks.Running() != 1 || bb.tasks.Running() != 0 {
			t.Fatalf("the accepting replica must run the task: running %d and %d", a.tasks.Running(), bb.tasks.Running())
		}
		a.kill(t)
		// The other replica takes it over once the dead one's claim expired,
		// and runs it again: attempt 2.
		g.waitStarted(t, 2)
		g.mu.Lock()
		attempts := append([]int64(nil), g.attempts...)
		g.mu.Unlock()
		if len(attempts) != 2 || attempts[1] != 2 {
			t.Fatalf("attempts %v, want the takeover's to be 2", attempts)
		}
		if eb.count(EventTakenOver) != 1 {
			t.Fatalf("%d takeovers reported, want 1", eb.count(EventTakenOver))
		}
		if !c.modern {
			// tasks/result on the surviving replica waits for the takeover's
			// result.
			done := make(chan map[string]any, 1)
			go func() { done <- c.ok(bb.url, "tasks/result", map[string]any{"taskId": id}) }()
			waitWaiting(t, bb.tasks, 1)
			g.release()
			out := <-done
			if text := out["content"].([]any)[0].(map[string]any)["text"]; text != "done 2" {
				t.Fatalf("tasks/result after the takeover = %v", out)
			}
			continue
		}
		g.release()
		got := c.until(bb.url, id, "completed")
		if text := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; text != "done 2" {
			t.Fatalf("tasks/get after the takeover = %v", got)
		}
	}
}

func testCrossCancel(t *testing.T, b storetest.Backend) {
	g := newGate()
	defer g.release()
	a, bb, _, _ := replicas(t, b, g, Options{SweepInterval: -1})
	for i, c := range []*client{legacyClient(t, "alice"), modernClient(t, "alice")} {
		id := c.create(a.url, "slow", nil)
		g.waitStarted(t, int64(i+1))
		// Another owner cannot cancel it.
		foreign := &client{t: t, owner: "mallory", modern: c.modern, declare: c.modern}
		if code, _, _ := foreign.fail(bb.url, "tasks/cancel", map[string]any{"taskId": id}); code != -32602 {
			t.Fatalf("a foreign cancel: %d", code)
		}
		c.ok(bb.url, "tasks/cancel", map[string]any{"taskId": id})
		// The call on the first replica is cancelled through the store.
		waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.ctxErrs) == i+1 })
		g.mu.Lock()
		cause := g.ctxErrs[i]
		g.mu.Unlock()
		if !errors.Is(cause, errEnded) {
			t.Fatalf("the call ended with %v, want the task's cancellation", cause)
		}
		if got := c.get(a.url, id); got["status"] != "cancelled" {
			t.Fatalf("tasks/get after cancel = %v", got)
		}
		waitFor(t, func() bool { return a.tasks.Running() == 0 })
	}
}

func testHandOver(t *testing.T, b storetest.Backend) {
	g := newGate()
	// Claims that would not expire within the test: only the hand-over can
	// move the task.
	a, bb, _, eb := replicas(t, b, g, Options{ClaimTTL: time.Hour, SweepInterval: 100 * time.Millisecond})
	c := legacyClient(t, "alice")
	id := c.create(a.url, "slow", nil)
	g.waitStarted(t, 1)
	a.stop(t)
	g.waitStarted(t, 2)
	if eb.count(EventTakenOver) != 1 {
		t.Fatalf("taken over %d times", eb.count(EventTakenOver))
	}
	g.release()
	if got := c.until(bb.url, id, "completed"); got["status"] != "completed" {
		t.Fatal(got)
	}
}
