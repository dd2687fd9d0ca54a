package rediskeys_test

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/examples/internal/rediskeys"
)

// A URL that is not a Redis URL is an error, and nothing is deleted.
func ExampleDelete() {
	err := rediskeys.Delete(context.Background(), "http://127.0.0.1:6379", "example-run:")
	fmt.Println(err != nil)
	// Output:
	// true
}
