package calltest_test

import (
	"context"
	"fmt"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/internal/calltest"
)

// A Set is one commit; a Get of a key that is not there is one get.
func ExampleLog_During() {
	ctx := context.Background()
	log := &calltest.Log{}
	st, _ := state.New(memstate.New(), &state.Options{Tracer: log, SweepInterval: -1})
	defer st.Close()
	fmt.Println(log.During(func() { _, _ = st.Set(ctx, "k", 1) }))
	fmt.Println(log.During(func() { _, _ = st.Get(ctx, "nothing") }))
	// Output:
	// [commit]
	// [get]
}
