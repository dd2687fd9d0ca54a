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

// startEcho starts the yardstick: a bare mcp-go server with the workload's
// two tool names, each answering with the arguments it got as text, over
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
