package main

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// The render tool called plainly (not as a task) draws every frame and
// says so; as a task it also checkpoints each frame and resumes after the
// last one on a takeover.
func Example_render() {
	var req mcp.CallToolRequest
	req.Params.Arguments = map[string]any{"frames": 2, "frame_ms": 1}
	res, err := render("replica-a")(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Content[0].(mcp.TextContent).Text)
	// Output:
	// rendered 2 frames: replica-a finished them on attempt 1, from frame 1
}
