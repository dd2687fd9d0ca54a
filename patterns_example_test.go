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

// Fan-out and fan-in: an orchestrator creates a join parent and one child
// per piece of work; the parent cannot be claimed until every child is done
// or failed, and then exactly one aggregator claims it.
func ExampleWithJoin() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	parent, err := st.CreateRun(ctx, "review-pr-42", nil, state.WithJoin())
	if err != nil {
		log.Fatal(err)
	}
	var children []state.Run
	for _, part := range []string{"security", "style", "tests"} {
		c, err := st.CreateRun(ctx, "review-"+part, nil, state.WithParent(parent.ID))
		if err != nil {
			log.Fatal(err)
		}
		children = append(children, c)
	}
	_, err = st.ClaimRun(ctx, parent.ID, "aggregator")
	fmt.Println(parent.Status, errors.Is(err, state.ErrWaiting))

	for i, c := range children {
		claim, err := st.ClaimRun(ctx, c.ID, fmt.Sprint("reviewer-", i))
		if err != nil {
			log.Fatal(err)
		}
		if _, err := st.CheckpointRun(ctx, c.ID, 1, "lgtm", state.WithFence(claim.Fence), state.WithStatus(state.StatusDone)); err != nil {
			log.Fatal(err)
		}
	}
	p, err := st.GetRun(ctx, parent.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.Status, p.Children[state.StatusDone])
	claim, err := st.ClaimRun(ctx, parent.ID, "aggregator")
	fmt.Println(claim.Run.Status, err)
	// Output:
	// waiting true
	// created 3
	// claimed <nil>
}

// A retried create with the same idempotency key returns the run the first
// call made instead of creating another.
func ExampleWithIdempotencyKey() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	first, err := st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7-refund"))
	if err != nil {
		log.Fatal(err)
	}
	retry, err := st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7-refund"))
	if err != nil {
		log.Fatal(err)
	}
	h, _ := st.Health(ctx)
	fmt.Println(retry.ID == first.ID, first.Replayed, retry.Replayed, h.Runs)
	// Output: true false true 1
}

// An effect ledger: a resumed agent calls Once again with the same key and
// gets the recorded result instead of paying twice. If the caller running
// the effect dies, its lease expires and a later caller runs it again.
func ExampleStore_Once() {
	ctx := context.Background()
	clk := statetest.NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	pay := func(ctx context.Context) (any, error) {
		return map[string]string{"payment": "pay_123"}, nil // call the payment provider here
	}
	r, err := st.Once(ctx, "refund/order-7", pay, state.WithClaimTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Ran, string(r.Value))
	r, err = st.Once(ctx, "refund/order-7", pay) // after a crash and resume
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Ran, string(r.Value))
	// Output:
	// true {"payment":"pay_123"}
	// false {"payment":"pay_123"}
}
