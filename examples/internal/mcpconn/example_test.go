package mcpconn_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/examples/internal/mcpconn"
	"github.com/statesidecar/state/sidecar"
)

// Connect to a sidecar (one on memory, in this process) and read the text of a tool's answer.
func ExampleConnect() {
	cfg := sidecar.Defaults()
	cfg.Backend, cfg.Port = sidecar.BackendMemory, 0
	ctx := context.Background()
	sc, err := loopback.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sc.Stop()
	c, err := mcpconn.Connect(ctx, sc.URL+"/mcp", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = "state_get", map[string]any{"key": "nothing/here"}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.IsError, mcpconn.Text(res) != "")
	// Output:
	// false true
}
