package memstate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
)

// A store in memory, for tests and ephemeral agents.
func ExampleNew() {
	ctx := context.Background()
	st, err := state.New(memstate.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	if _, err := st.Set(ctx, "k", []int{1, 2}); err != nil {
		log.Fatal(err)
	}
	e, _ := st.Get(ctx, "k")
	fmt.Println(string(e.Value), st.Backend())
	// Output: [1,2] memory
}

// Two opens of the same mem:// name share one store.
func ExampleURLOpener() {
	ctx := context.Background()
	a, _ := state.Open(ctx, "mem://shared")
	defer a.Close()
	b, _ := state.Open(ctx, "mem://shared")
	defer b.Close()

	_, _ = a.Set(ctx, "k", true)
	ok, _ := b.Exists(ctx, "k")
	fmt.Println(ok)
	// Output: true
}
