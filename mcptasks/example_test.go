package mcptasks_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/mcptasks"
)

// A server whose "report" tool runs as a task: the call returns a task at
// once, and tasks/result waits for the outcome. HandleMessage is the front
// every transport uses (Handler for HTTP, Stdio for stdio).
func Example() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://example")
	if err != nil {
		panic(err)
	}
	defer st.Close()

	s := server.NewMCPServer("reports", "1.0.0", mcptasks.ServerOptions()...)
	s.AddTool(mcp.NewTool("report", mcp.WithString("month")),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ex, _ := mcptasks.FromContext(ctx) // set: the call runs as a task
			_ = ex.Checkpoint(ctx, "halfway")  // a takeover would resume from here
			return mcp.NewToolResultText("report for " + req.GetString("month", "?")), nil
		})
	tasks, err := mcptasks.New(st, s, nil)
	if err != nil {
		panic(err)
	}
	defer tasks.Close(ctx)
	if err := tasks.Enable("report"); err != nil {
		panic(err)
	}

	// A 2025-11-25 client asks for a task with params.task.
	reply, _, _ := tasks.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call",
		"params":{"name":"report","arguments":{"month":"May"},"task":{"ttl":60000}}}`), nil)
	var created struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
				TTL    int64  `json:"ttl"`
			} `json:"task"`
		} `json:"result"`
	}
	_ = json.Unmarshal(reply, &created)
	fmt.Println(created.Result.Task.Status, created.Result.Task.TTL)

	reply, _, _ = tasks.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"tasks/result",
		"params":{"taskId":"`+created.Result.Task.TaskID+`"}}`), nil)
	var result struct {
		Result mcp.CallToolResult `json:"result"`
	}
	_ = json.Unmarshal(reply, &result)
	fmt.Println(result.Result.Content[0].(mcp.TextContent).Text)
	// Output:
	// working 60000
	// report for May
}
