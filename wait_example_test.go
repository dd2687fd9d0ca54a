package state_test

import (
	"context"
	"fmt"
	"log"

	"github.com/statesidecar/state"
)

// A follower reads the changes under a prefix as they happen, in order,
// and resumes after a break from the last event it handled, missing
// nothing.
func ExampleStore_Watch() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	for _, k := range []string{"plan/1", "notes", "plan/2"} {
		if _, err := st.Set(ctx, k, "draft"); err != nil {
			log.Fatal(err)
		}
	}
	var last int64 // the ID of the last event handled: persist it to resume
	follow := func(n int) {
		for ev, err := range st.Watch(ctx, state.WatchQuery{After: last, Prefix: "plan/"}) {
			if err != nil {
				log.Fatal(err)
			}
			fmt.Println(ev.Op, ev.Key, string(ev.Value))
			last = ev.ID
			if n--; n == 0 {
				return
			}
		}
	}
	follow(1) // handles plan/1, then stops
	if _, err := st.Set(ctx, "plan/1", "final"); err != nil {
		log.Fatal(err)
	}
	follow(2) // resumes: plan/2, then the new write
	// Output:
	// kv.set plan/1 "draft"
	// kv.set plan/2 "draft"
	// kv.set plan/1 "final"
}

// An aggregator waits for a worker to finish a run without polling: the
// worker's last checkpoint wakes it.
func ExampleStore_WaitRun() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	run, err := st.CreateRun(ctx, "review-42", nil)
	if err != nil {
		log.Fatal(err)
	}
	go func() { // the worker
		c, err := st.ClaimRun(ctx, run.ID, "reviewer")
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.CheckpointRun(ctx, run.ID, 1, "approved", state.WithFence(c.Fence), state.WithStatus(state.StatusDone)); err != nil {
			log.Fatal(err)
		}
	}()
	done, err := st.WaitRun(ctx, run.ID, state.StatusDone, state.StatusFailed)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(done.Status, done.LastStep)
	// Output:
	// done 1
}

// A consumer waits for a key to change: WaitKey returns once the entry is
// newer than the version the consumer has.
func ExampleStore_WaitKey() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	cur, err := st.Set(ctx, "config", map[string]int{"replicas": 2})
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if _, err := st.Set(ctx, "config", map[string]int{"replicas": 3}); err != nil {
			log.Fatal(err)
		}
	}()
	next, err := st.WaitKey(ctx, "config", cur.Version)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(next.Value), next.Version > cur.Version)
	// Output:
	// {"replicas":3} true
}

// A supervisor waits until every child of a run it oversees has finished,
// without joining them: WaitRunFunc with ChildrenFinished.
func ExampleChildrenFinished() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	batch, err := st.CreateRun(ctx, "nightly-batch", nil)
	if err != nil {
		log.Fatal(err)
	}
	var ids []string
	for _, name := range []string{"shard-a", "shard-b"} {
		c, err := st.CreateRun(ctx, name, nil, state.WithParent(batch.ID))
		if err != nil {
			log.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	go func() { // the workers
		for i, id := range ids {
			status := []state.Status{state.StatusDone, state.StatusFailed}[i]
			if _, err := st.CheckpointRun(ctx, id, 1, "out", state.WithStatus(status)); err != nil {
				log.Fatal(err)
			}
		}
	}()
	r, err := st.WaitRunFunc(ctx, batch.ID, state.ChildrenFinished)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Status, r.Children[state.StatusDone], r.Children[state.StatusFailed])
	// Output:
	// created 1 1
}
