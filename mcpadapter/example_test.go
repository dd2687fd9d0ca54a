package mcpadapter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/mcpadapter"
)

// exampleStore is a memory store whose clock stands still at
// 2030-01-01T00:00:00Z, so that the examples print the same times.
func exampleStore() *state.Store {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	st, err := state.New(memstate.New(), &state.Options{Clock: state.ClockFunc(func() time.Time { return at })})
	if err != nil {
		log.Fatal(err)
	}
	return st
}

// exampleClient connects an in-process MCP client to s.
func exampleClient(ctx context.Context, s *server.MCPServer) *client.Client {
	c, err := client.NewInProcessClient(s)
	if err != nil {
		log.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
		log.Fatal(err)
	}
	return c
}

// exampleCall calls a tool and returns its result's text.
func exampleCall(ctx context.Context, c *client.Client, name, args string) string {
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, json.RawMessage(args)
	res, err := c.CallTool(ctx, req)
	if err != nil {
		log.Fatal(err)
	}
	return res.Content[0].(mcp.TextContent).Text
}

// A ready server of the 21 tools, called in-process.
func ExampleNewServer() {
	ctx := context.Background()
	st := exampleStore()
	defer st.Close()
	c := exampleClient(ctx, mcpadapter.NewServer(st, nil))
	defer c.Close()

	fmt.Println(exampleCall(ctx, c, "state_set", `{"key":"plan/42","value":{"steps":3,"id":9007199254740993},"ttl_seconds":90.5,"agent_id":"planner"}`))
	fmt.Println(exampleCall(ctx, c, "state_get", `{"key":"plan/42"}`))
	fmt.Println(exampleCall(ctx, c, "state_get", `{"key":"plan/43"}`))
	fmt.Println(exampleCall(ctx, c, "history_log", `{"n":0}`))
	// Output:
	// {"ok":true,"version":1}
	// {"key":"plan/42","value":{"steps":3,"id":9007199254740993},"found":true,"version":1,"agent_id":"planner","updated_at":1893456000.0,"expires_at":1893456090.5}
	// {"key":"plan/43","value":null,"found":false,"version":null,"agent_id":null,"updated_at":null,"expires_at":null}
	// Error calling tool 'history_log': n must be >= 1, got 0
}

// A worker claims a run, checkpoints its steps with its fence, and finishes
// it with the last checkpoint.
func ExampleNewServer_workflow() {
	ctx := context.Background()
	st := exampleStore()
	defer st.Close()
	c := exampleClient(ctx, mcpadapter.NewServer(st, nil))
	defer c.Close()

	var created struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(exampleCall(ctx, c, "workflow_create", `{"name":"pr-review-42","tags":{"pipeline":"pr-review"}}`)), &created)
	run := `"run_id":"` + created.RunID + `"`

	var claim struct {
		Claimed bool  `json:"claimed"`
		Fence   int64 `json:"fence"`
		Attempt int64 `json:"attempt"`
	}
	_ = json.Unmarshal([]byte(exampleCall(ctx, c, "workflow_claim", `{`+run+`,"agent_id":"worker-A","claim_ttl_seconds":60}`)), &claim)
	fmt.Printf("claimed=%v fence=%d attempt=%d\n", claim.Claimed, claim.Fence, claim.Attempt)

	var lost struct{ Reason string }
	_ = json.Unmarshal([]byte(exampleCall(ctx, c, "workflow_claim", `{`+run+`,"agent_id":"worker-B"}`)), &lost)
	fmt.Println(lost.Reason)

	fence := fmt.Sprint(claim.Fence)
	exampleCall(ctx, c, "workflow_checkpoint", `{`+run+`,"step":1,"output":{"files":12},"agent_id":"worker-A","fence":`+fence+`}`)
	exampleCall(ctx, c, "workflow_checkpoint", `{`+run+`,"step":2,"output":"LGTM","agent_id":"worker-A","fence":`+fence+`,"status":"done"}`)

	var resume struct {
		LastStep    int64           `json:"last_step"`
		StepOutputs json.RawMessage `json:"step_outputs"`
		Meta        struct{ Status string }
	}
	_ = json.Unmarshal([]byte(exampleCall(ctx, c, "workflow_resume", `{`+run+`}`)), &resume)
	fmt.Printf("status=%s last_step=%d outputs=%s\n", resume.Meta.Status, resume.LastStep, resume.StepOutputs)
	// Output:
	// claimed=true fence=1 attempt=1
	// Workflow is in status 'claimed' (agent: worker-A)
	// status=done last_step=2 outputs={"1":{"files":12},"2":"LGTM"}
}

// Mount the tools beside a server's own, under a prefix.
func ExampleRegister() {
	st := exampleStore()
	defer st.Close()
	s := server.NewMCPServer("my-agent-tools", "1.0.0", server.WithRecovery())
	s.AddTool(mcp.NewTool("ping", mcp.WithDescription("Answer pong"),
		mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("pong"), nil
		})
	mcpadapter.Register(s, st, &mcpadapter.Options{Prefix: "state.", Tools: []string{"state_get", "state_set"}})

	ctx := context.Background()
	c := exampleClient(ctx, s)
	defer c.Close()
	fmt.Println(exampleCall(ctx, c, "ping", `{}`))
	fmt.Println(exampleCall(ctx, c, "state.state_set", `{"key":"k","value":[1,2]}`))
	fmt.Println(exampleCall(ctx, c, "state.state_get", `{"key":"k","extra":1}`))
	// Output:
	// pong
	// {"ok":true,"version":1}
	// Error calling tool 'state.state_get': unexpected argument 'extra' (this tool takes key)
}

// Each request works in the namespace its context carries, typically set
// by authentication middleware from the caller's bearer token.
func ExampleWithNamespace() {
	ctx := context.Background()
	st := exampleStore()
	defer st.Close()
	c := exampleClient(ctx, mcpadapter.NewServer(st, nil))
	defer c.Close()

	alice := mcpadapter.WithNamespace(ctx, "alice")
	exampleCall(alice, c, "state_set", `{"key":"k","value":"alice's"}`)
	fmt.Println(exampleCall(alice, c, "state_get", `{"key":"k"}`)[:40])
	fmt.Println(exampleCall(mcpadapter.WithNamespace(ctx, "bob"), c, "state_get", `{"key":"k"}`)[:40])
	// Output:
	// {"key":"k","value":"alice's","found":tru
	// {"key":"k","value":null,"found":false,"v
}

func ExampleToolNames() {
	fmt.Println(len(mcpadapter.ToolNames()), mcpadapter.ToolNames()[:4])
	// Output: 21 [state_set state_get state_delete state_list]
}

// A transport passes each message through PrepareMessage so that numbers
// beyond float64 reach the tools: a value keeps 1e400 exactly.
func ExamplePrepareMessage() {
	ctx := context.Background()
	st := exampleStore()
	defer st.Close()
	s := mcpadapter.NewServer(st, nil)
	send := func(msg string) string {
		b, _ := json.Marshal(s.HandleMessage(ctx, mcpadapter.PrepareMessage([]byte(msg))))
		var resp struct {
			Result struct {
				Content []struct{ Text string } `json:"content"`
			} `json:"result"`
		}
		_ = json.Unmarshal(b, &resp)
		return resp.Result.Content[0].Text
	}
	fmt.Println(send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"big","value":{"a":1e400}}}}`))
	fmt.Println(send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"big"}}}`))
	fmt.Println(send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1,"ttl_seconds":1e309}}}`))
	// Output:
	// {"ok":true,"version":1}
	// {"key":"big","value":{"a":1e400},"found":true,"version":1,"agent_id":null,"updated_at":1893456000.0,"expires_at":null}
	// Error calling tool 'state_set': ttl_seconds is too large, got 1e309
}
