package pause_test

import (
	"context"
	"fmt"
	"time"

	"github.com/statesidecar/state/examples/internal/pause"
)

// A pause ends early, with the context's error, when the context ends.
func ExampleSleep() {
	fmt.Println(pause.Sleep(context.Background(), time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(pause.Sleep(ctx, time.Hour))
	// Output:
	// <nil>
	// context canceled
}
