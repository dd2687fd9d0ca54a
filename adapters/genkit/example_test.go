package genkit_test

import (
	"context"
	"fmt"
	"log"

	"github.com/firebase/genkit/go/core/x/session"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/genkit"
	_ "github.com/statesidecar/state/backend/memstate"
)

// A Genkit session whose state lives in the store: session.Load in any
// process that opens the same store finds it.
func ExampleNewSessionStore() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://") // or sqlite:///var/lib/agent/state.db, redis://...
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	type prefs struct{ Language string }
	store := genkit.NewSessionStore[prefs](st, nil)

	sess, err := session.New(ctx, session.WithStore[prefs](store), session.WithID[prefs]("ada"),
		session.WithInitialState(prefs{Language: "en"}))
	if err != nil {
		log.Fatal(err)
	}
	if err := sess.UpdateState(ctx, prefs{Language: "fr"}); err != nil {
		log.Fatal(err)
	}

	loaded, err := session.Load(ctx, store, "ada")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(loaded.State().Language)
	// Output: fr
}
