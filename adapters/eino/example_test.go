package eino_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/cloudwego/eino/compose"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/eino"
	_ "github.com/statesidecar/state/backend/memstate"
)

// An Eino graph interrupted before a node and resumed from its checkpoint
// in the store; in production the resuming code runs in another process
// (see examples/approval).
func ExampleNewCheckPointStore() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://") // or sqlite:///var/lib/agent/state.db, redis://...
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	cps, err := eino.NewCheckPointStore(st, &eino.Options{TTL: 24 * time.Hour})
	if err != nil {
		log.Fatal(err)
	}

	g := compose.NewGraph[string, string]()
	_ = g.AddLambdaNode("shout", compose.InvokableLambda(func(_ context.Context, in string) (string, error) {
		return in + "!", nil
	}))
	_ = g.AddEdge(compose.START, "shout")
	_ = g.AddEdge("shout", compose.END)
	r, err := g.Compile(ctx, compose.WithCheckPointStore(cps), compose.WithInterruptBeforeNodes([]string{"shout"}))
	if err != nil {
		log.Fatal(err)
	}

	_, err = r.Invoke(ctx, "hello", compose.WithCheckPointID("run-1"))
	info, interrupted := compose.ExtractInterruptInfo(err)
	fmt.Println("interrupted before", info.BeforeNodes, interrupted)
	_, found, _ := cps.Get(ctx, "run-1")
	fmt.Println("checkpoint stored:", found)

	out, err := r.Invoke(ctx, "", compose.WithCheckPointID("run-1"))
	fmt.Println(out, err)
	// Output:
	// interrupted before [shout] true
	// checkpoint stored: true
	// hello! <nil>
}
