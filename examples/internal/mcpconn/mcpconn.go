// Package mcpconn connects the examples' MCP clients to a sidecar over
// Streamable HTTP and reads what a tool answered.
package mcpconn

import (
	"context"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Connect connects to the MCP endpoint (http://host:port/mcp) and
// initialises the session, introducing the client as name. Its errors are
// the client library's, for the caller to word.
func Connect(ctx context.Context, endpoint, name string, opts ...transport.StreamableHTTPCOption) (*client.Client, error) {
	c, err := client.NewStreamableHttpClient(endpoint, opts...)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1.0.0"}
	if _, err := c.Initialize(ctx, init); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Text returns the first text content of a tool's result: its JSON answer,
// or the message of a tool error. It is "" if there is none.
func Text(res *mcp.CallToolResult) string {
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}
