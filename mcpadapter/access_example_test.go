package mcpadapter_test

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
)

// A host that authenticates its callers puts each one in the context of
// its requests: a read-only caller sees only the read-only tools, a write
// is refused with a tool error, and the writes of a writer record its
// principal in the history.
func ExampleWithCaller() {
	ctx := context.Background()
	st := exampleStore()
	defer st.Close()
	c := exampleClient(ctx, mcpadapter.NewServer(st, nil))
	defer c.Close()

	reader := mcpadapter.WithCaller(ctx, mcpadapter.Caller{Principal: "alice", Access: mcpadapter.AccessRead})
	tools, _ := c.ListTools(reader, mcp.ListToolsRequest{})
	fmt.Println(len(tools.Tools), "tools for a reader")

	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = "state_set", map[string]any{"key": "plan", "value": "v1"}
	res, _ := c.CallTool(reader, req)
	fmt.Println(res.IsError, res.Content[0].(mcp.TextContent).Text)

	writer := mcpadapter.WithCaller(ctx, mcpadapter.Caller{Principal: "bob", Access: mcpadapter.AccessWrite})
	_, _ = c.CallTool(writer, req)
	evs, _ := st.History(ctx, state.HistoryQuery{})
	fmt.Println(evs[0].Op, evs[0].Principal)
	// Output:
	// 11 tools for a reader
	// true Error calling tool 'state_set': permission denied: state_set needs write access and this caller has read access; ask for a token with more scope
	// kv.set bob
}
