package state_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/statetest"
)

// Open a store from a URL; here the memory backend, which needs no setup.
// "sqlite:///var/lib/agent/state.db" works the same way after importing
// backend/sqlitestate.
func Example() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	if _, err := st.Set(ctx, "plan/42", map[string]any{"steps": 3}, state.WithAgent("planner")); err != nil {
		log.Fatal(err)
	}
	e, err := st.Get(ctx, "plan/42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(e.Value), e.AgentID)
	// Output: {"steps":3} planner
}

// Compare-and-set: a write conditioned on the version the writer read.
func ExampleIfVersion() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	e, _ := st.Set(ctx, "counter", 1)
	if _, err := st.Set(ctx, "counter", 2, state.IfVersion(e.Version)); err != nil {
		log.Fatal(err)
	}
	_, err = st.Set(ctx, "counter", 3, state.IfVersion(e.Version)) // stale version
	var conflict *state.ConflictError
	fmt.Println(errors.Is(err, state.ErrConflict), errors.As(err, &conflict) && conflict.Current > e.Version)
	// Output: true true
}

// Options built up before a call take the type of the method's options:
// here CheckpointOption, which WithAgent, WithFence and WithStatus are.
// Appending WithTTL, which CheckpointRun does not honour, would not compile.
func ExampleCheckpointOption() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	run, _ := st.CreateRun(ctx, "report", nil)
	claim, err := st.ClaimRun(ctx, run.ID, "worker-a")
	if err != nil {
		log.Fatal(err)
	}
	const last = 2
	for step := int64(1); step <= last; step++ {
		opts := []state.CheckpointOption{state.WithAgent("worker-a"), state.WithFence(claim.Fence)}
		if step == last {
			opts = append(opts, state.WithStatus(state.StatusDone))
		}
		if _, err := st.CheckpointRun(ctx, run.ID, step, map[string]int64{"step": step}, opts...); err != nil {
			log.Fatal(err)
		}
	}
	r, _ := st.GetRun(ctx, run.ID)
	fmt.Println(r.Status, r.LastStep)
	// Output: done 2
}

// A worker claims a run, checkpoints, and crashes; once its claim expires a
// second worker takes over and resumes from the last checkpoint, and the
// crashed worker's late write is refused.
func ExampleStore_ClaimRun() {
	ctx := context.Background()
	clk := statetest.NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	run, _ := st.CreateRun(ctx, "pr-review", map[string]string{"pr": "42"})
	a, _ := st.ClaimRun(ctx, run.ID, "worker-a", state.WithClaimTTL(time.Minute))
	_, _ = st.CheckpointRun(ctx, run.ID, 1, map[string]int{"files": 12}, state.WithFence(a.Fence))

	clk.Advance(time.Minute) // worker-a crashed: no heartbeat

	b, _ := st.ClaimRun(ctx, run.ID, "worker-b")
	res, _ := st.ResumeRun(ctx, run.ID)
	fmt.Println("reclaimed:", b.Reclaimed, "attempt:", b.Attempt, "resume after step", res.LastStep)

	_, err = st.CheckpointRun(ctx, run.ID, 2, "late", state.WithFence(a.Fence))
	fmt.Println("stale worker refused:", errors.Is(err, state.ErrNotHeld))

	done, _ := st.CheckpointRun(ctx, run.ID, 2, "LGTM", state.WithFence(b.Fence), state.WithStatus(state.StatusDone))
	fmt.Println(done.Status)
	// Output:
	// reclaimed: true attempt: 2 resume after step 1
	// stale worker refused: true
	// done
}

// Discover the runs an agent could claim now.
func ExampleStore_DiscoverRuns() {
	ctx := context.Background()
	st, _ := statetestStore()
	defer st.Close()

	_, _ = st.CreateRun(ctx, "review", map[string]string{"pipeline": "pr"})
	_, _ = st.CreateRun(ctx, "deploy", map[string]string{"pipeline": "release"})
	page, _ := st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{"pipeline": "pr"}, Claimable: true})
	for _, r := range page.Runs {
		fmt.Println(r.Name, r.Status)
	}
	// Output: review created
}

// Leases are exclusive; the fence grows with every new holder.
func ExampleStore_TryAcquireLease() {
	ctx := context.Background()
	clk := statetest.NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	a, _ := st.TryAcquireLease(ctx, "pr:42:comments", "worker-a", 30*time.Second)
	_, err = st.TryAcquireLease(ctx, "pr:42:comments", "worker-b", 30*time.Second)
	fmt.Println(err)

	clk.Advance(30 * time.Second)
	b, _ := st.TryAcquireLease(ctx, "pr:42:comments", "worker-b", 30*time.Second)
	fmt.Println("takeover:", b.Takeover, "fence grew:", b.Fence > a.Fence)
	// Output:
	// state: lease.acquire "pr:42:comments": Held by 'worker-a'
	// takeover: true fence grew: true
}

// Keep a lease alive in the background while working.
func ExampleStore_KeepAlive() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	l, err := st.AcquireLease(ctx, "leader", "replica-1", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	ka := st.KeepAlive(ctx, l)
	defer ka.Stop()
	select {
	case <-ka.Done():
		fmt.Println("lost the lease:", ka.Err())
	default:
		fmt.Println("leading with fence", l.Fence)
	}
	// Output: leading with fence 1
}

// Save and restore an agent's conversational context.
func ExampleStore_SetSession() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	_, _ = st.SetSession(ctx, "worker-a:pr-42", map[string]any{"next": "security review"})
	s, _ := st.GetSession(ctx, "worker-a:pr-42")
	fmt.Println(string(s.Context))
	// Output: {"next":"security review"}
}

// Every transition is in the history, newest first.
func ExampleStore_History() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	_, _ = st.Set(ctx, "diff", "v1", state.WithAgent("orchestrator"))
	_, _ = st.Set(ctx, "diff", "v2", state.WithAgent("orchestrator"))
	evs, _ := st.History(ctx, state.HistoryQuery{Key: "diff"})
	for _, e := range evs {
		fmt.Println(e.Op, string(e.Value), string(e.Prev), e.AgentID)
	}
	// Output:
	// kv.set "v2" "v1" orchestrator
	// kv.set "v1"  orchestrator
}

// Namespaces isolate tenants sharing one backend.
func ExampleStore_Namespace() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	a, _ := st.Namespace("team-a")
	b, _ := st.Namespace("team-b")
	_, _ = a.Set(ctx, "k", "a's")
	_, err = b.Get(ctx, "k")
	fmt.Println(errors.Is(err, state.ErrNotFound))
	// Output: true
}

// The McpStateTool interface of agent frameworks, backed by a store.
func ExampleStore_StateTool() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	tool := st.StateTool()
	_ = tool.Store(ctx, "checkpoints/agent-7/latest", []byte(`{"step":4}`))
	v, _ := tool.Retrieve(ctx, "checkpoints/agent-7/latest")
	keys, _ := tool.List(ctx, "checkpoints/")
	fmt.Println(string(v), keys)
	// Output: {"step":4} [checkpoints/agent-7/latest]
}

func statetestStore() (*state.Store, *statetest.Clock) {
	clk := statetest.NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	return st, clk
}
