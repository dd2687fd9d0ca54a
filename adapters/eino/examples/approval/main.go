// Command approval runs an Eino graph that stops for a human's approval and
// is resumed later, in another process, from its checkpoint in a state
// store:
//
//	go run ./examples/approval -store sqlite:///tmp/eino.db -run order-42 -input "refund 30 EUR"
//	  → interrupted: waiting for approval (interrupt <id>)
//	go run ./examples/approval -store sqlite:///tmp/eino.db -run order-42 -resume <id> -approver ada
//	  → refund 30 EUR | drafted | approved by ada | published
//
// The graph is draft → approve → publish. The approve node interrupts the
// first time it runs, keeping the drafted text as its interrupt state; the
// checkpoint (that state, the position in the graph) is written to the
// store, and the second process finds it there.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/cloudwego/eino/compose"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/eino"
	_ "github.com/statesidecar/state/backend/pgstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
)

func main() {
	storeURL := flag.String("store", "sqlite:eino.db", "state store URL")
	runID := flag.String("run", "run-1", "checkpoint id of the run")
	input := flag.String("input", "refund 30 EUR", "what to draft (first run)")
	resume := flag.String("resume", "", "interrupt id to resume")
	approver := flag.String("approver", "", "who approves (with -resume)")
	flag.Parse()
	log.SetFlags(0)
	out, err := run(context.Background(), *storeURL, *runID, *input, *resume, *approver)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, out)
}

func run(ctx context.Context, storeURL, runID, input, resume, approver string) (string, error) {
	st, err := state.Open(ctx, storeURL)
	if err != nil {
		return "", err
	}
	defer st.Close()
	cps, err := eino.NewCheckPointStore(st, &eino.Options{TTL: 24 * time.Hour})
	if err != nil {
		return "", err
	}
	r, err := graph(ctx, cps)
	if err != nil {
		return "", err
	}
	if resume != "" {
		ctx = compose.ResumeWithData(ctx, resume, approver)
	}
	out, err := r.Invoke(ctx, input, compose.WithCheckPointID(runID)) // on resume the input is not used
	if info, ok := compose.ExtractInterruptInfo(err); ok {
		return fmt.Sprintf("interrupted: waiting for approval (interrupt %s)", info.InterruptContexts[0].ID), nil
	}
	return out, err
}

func graph(ctx context.Context, cps compose.CheckPointStore) (compose.Runnable[string, string], error) {
	g := compose.NewGraph[string, string]()
	steps := []struct {
		name string
		fn   func(ctx context.Context, in string) (string, error)
	}{
		{"draft", func(_ context.Context, in string) (string, error) { return in + " | drafted", nil }},
		{"approve", func(ctx context.Context, in string) (string, error) {
			// The draft travels in the checkpoint as the node's interrupt
			// state: the resuming process has nothing else.
			_, _, draft := compose.GetInterruptState[string](ctx)
			resumed, hasData, who := compose.GetResumeContext[string](ctx)
			if !resumed {
				return "", compose.StatefulInterrupt(ctx, "waiting for approval", in)
			}
			if !hasData || who == "" {
				return "", errors.New("resumed without an approver")
			}
			return draft + " | approved by " + who, nil
		}},
		{"publish", func(_ context.Context, in string) (string, error) { return in + " | published", nil }},
	}
	prev := compose.START
	for _, s := range steps {
		if err := g.AddLambdaNode(s.name, compose.InvokableLambda(s.fn)); err != nil {
			return nil, err
		}
		if err := g.AddEdge(prev, s.name); err != nil {
			return nil, err
		}
		prev = s.name
	}
	if err := g.AddEdge(prev, compose.END); err != nil {
		return nil, err
	}
	return g.Compile(ctx, compose.WithCheckPointStore(cps), compose.WithGraphName("approval"))
}
