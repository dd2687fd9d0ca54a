package adk_test

import (
	"context"
	"fmt"
	"log"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/adk"
	_ "github.com/statesidecar/state/backend/memstate"
	"google.golang.org/adk/v2/session"
)

// Sessions of an ADK agent in a state store: pass the service to
// runner.Config{SessionService: ...}. Here it is called directly: an event's
// state delta lands in the session, the user's and the app's state, except
// for "temp:" keys.
func ExampleNewSessionService() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://") // or sqlite:///var/lib/agent/state.db, redis://...
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	svc := adk.NewSessionService(st, nil)

	created, err := svc.Create(ctx, &session.CreateRequest{AppName: "shop", UserID: "ada", SessionID: "s1"})
	if err != nil {
		log.Fatal(err)
	}
	ev := &session.Event{ID: "e1", Author: "agent", Actions: session.EventActions{StateDelta: map[string]any{
		"cart": []any{"tea"}, "user:currency": "EUR", "app:promo": "spring", "temp:scratch": 1}}}
	if err := svc.AppendEvent(ctx, created.Session, ev); err != nil {
		log.Fatal(err)
	}

	got, err := svc.Get(ctx, &session.GetRequest{AppName: "shop", UserID: "ada", SessionID: "s1"})
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"cart", "user:currency", "app:promo", "temp:scratch"} {
		v, err := got.Session.State().Get(k)
		fmt.Println(k, v, err)
	}
	fmt.Println("events:", got.Session.Events().Len())
	// Output:
	// cart [tea] <nil>
	// user:currency EUR <nil>
	// app:promo spring <nil>
	// temp:scratch <nil> state key does not exist
	// events: 1
}
