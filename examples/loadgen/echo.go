package main

import (
	"context"
	"net"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// echoName is the -backends name of the bare mcp-go server.
const echoName = "echo"

// startEcho starts the yardstick: a bare mcp-go server with the workloads'
// tool names, each answering with the arguments it got as text, over
// the same stateless Streamable HTTP as the sidecar. The sidecar's calls/s
// divided by this server's is the share of the MCP path it keeps.
func startEcho() (*inProcess, error) {
	s := server.NewMCPServer("echo", "1.0.0", server.WithToolCapabilities(false), server.WithRecovery())
	echo := func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(string(req.Params.RawArguments)), nil
	}
	for _, name := range []string{"state_set", "state_get"} {
		s.AddTool(mcp.NewTool(name, mcp.WithDescription("echo the arguments"),
			mcp.WithString("key", mcp.Required()), mcp.WithObject("value")), echo)
	}
	// The claim workload's tools: workflow_create answers a run id, and
	// workflow_claim echoes its arguments.
	s.AddTool(mcp.NewTool("workflow_create", mcp.WithDescription("answer a run id"), mcp.WithString("name", mcp.Required())),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultStructured(map[string]any{"run_id": "echo-run"}, `{"run_id":"echo-run"}`), nil
		})
	s.AddTool(mcp.NewTool("workflow_claim", mcp.WithDescription("echo the arguments"),
		mcp.WithString("run_id", mcp.Required()), mcp.WithString("agent_id", mcp.Required())), echo)
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	return &inProcess{url: "http://" + ln.Addr().String() + "/mcp", closeFn: func() error {
		err := srv.Close()
		<-served
		return err
	}}, nil
}
