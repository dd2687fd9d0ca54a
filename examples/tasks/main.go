// Command tasks is a Go MCP server of its own with durable tasks (package
// mcptasks): its slow "render" tool runs as a task that outlives the
// process that started it.
//
//	cd examples   # a module of its own
//	go run ./tasks                 # the story: two replicas, one killed mid-task
//	go run ./tasks serve -store sqlite:///tmp/t.db -addr 127.0.0.1:8080   # one replica
//
// The story starts two replicas of the server (processes of this same
// program) over one SQLite file, asks the first to render as a task, polls
// the task on the second, kills the first with SIGKILL in the middle of the
// work, and watches the second take the task over and finish it from the
// last checkpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/statesidecar/state/examples/internal/cli"
)

func main() {
	cli.Main("tasks", func(ctx context.Context) error { return run(ctx, os.Args[1:]) })
}

func run(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "serve" {
		return serve(ctx, args[1:])
	}
	fs := flag.NewFlagSet("tasks", flag.ContinueOnError)
	frames := fs.Int("frames", 8, "frames the render task draws, each taking -frame-time")
	frameTime := fs.Duration("frame-time", 400e6, "time one frame takes")
	killAt := fs.Int("kill-at", 3, "frame after which the first replica is killed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *killAt < 1 || *killAt >= *frames {
		return fmt.Errorf("-kill-at must be between 1 and -frames - 1")
	}
	return story(ctx, os.Stdout, *frames, *frameTime, *killAt)
}
