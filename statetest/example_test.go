package statetest_test

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

// A TTL test without sleeping: move the fake clock instead. In a test,
// statetest.NewStore(t) returns such a store and clock in one call.
func ExampleClock() {
	ctx := context.Background()
	clk := statetest.NewClock()
	st, err := state.New(memstate.New(), &state.Options{Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	_, _ = st.Set(ctx, "token", "abc", state.WithTTL(time.Minute))
	clk.Advance(time.Minute)
	_, err = st.Get(ctx, "token")
	fmt.Println(errors.Is(err, state.ErrNotFound), clk.Now().Format(time.RFC3339))
	// Output: true 2030-01-01T00:01:00Z
}
