package cli_test

import (
	"context"
	"fmt"

	"github.com/statesidecar/state/examples/internal/cli"
)

// A command's main: run gets a context that Ctrl-C cancels.
func ExampleMain() {
	cli.Main("hello", func(ctx context.Context) error {
		fmt.Println("hello, cancelled:", ctx.Err() != nil)
		return nil
	})
	// Output:
	// hello, cancelled: false
}
