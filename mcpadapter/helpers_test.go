package mcpadapter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// mcpc is an MCP client connected in-process to a server of the 21 tools.
// Every successful result it sees is checked against the tool's advertised
// output schema (by the server) and field order (here).
type mcpc struct {
	t      *testing.T
	c      *client.Client
	fields map[string][]string // tool name → output schema property order
}

// connect starts an in-process client on s.
func connect(t *testing.T, s *server.MCPServer) *mcpc {
	t.Helper()
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	lt, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m := &mcpc{t: t, c: c, fields: map[string][]string{}}
	for _, tl := range lt.Tools {
		m.fields[tl.Name] = tl.OutputSchema.PropertyOrder
	}
	return m
}

// newClient returns a client of a NewServer over a fresh memory store whose
// clock moves only when told to. The server validates every result against
// the tool's output schema.
func newClient(t *testing.T, opts *mcpadapter.Options) (*mcpc, *state.Store, *statetest.Clock) {
	t.Helper()
	st, clk := statetest.NewStore(t)
	return connect(t, mcpadapter.NewServer(st, opts, server.WithOutputSchemaValidation())), st, clk
}

// call calls a tool with args, a JSON object sent byte for byte, in ctx.
func (m *mcpc) callCtx(ctx context.Context, name, args string) *mcp.CallToolResult {
	m.t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name = name
	if args != "" {
		req.Params.Arguments = json.RawMessage(args)
	}
	res, err := m.c.CallTool(ctx, req)
	if err != nil {
		m.t.Fatalf("%s(%s): protocol error %v, want a tool result", name, args, err)
	}
	return res
}

// ok calls a tool that must succeed and returns its result's JSON text,
// after checking that the structured content is the same JSON and that its
// fields come in the output schema's order.
func (m *mcpc) ok(name, args string) string {
	m.t.Helper()
	return m.okCtx(m.t.Context(), name, args)
}

func (m *mcpc) okCtx(ctx context.Context, name, args string) string {
	m.t.Helper()
	res := m.callCtx(ctx, name, args)
	text := textOf(m.t, res)
	if res.IsError {
		m.t.Fatalf("%s(%s): tool error %s", name, args, text)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, res.RawStructuredContent); err != nil || compact.String() != text {
		m.t.Fatalf("%s: structured content %s differs from text %s", name, res.RawStructuredContent, text)
	}
	if got, want := topKeys(m.t, text), m.fields[name]; !slices.Equal(got, want) {
		m.t.Fatalf("%s: result fields %v, want the output schema's %v", name, got, want)
	}
	return text
}

// fail calls a tool that must fail with a tool error and returns its text.
func (m *mcpc) fail(name, args string) string {
	m.t.Helper()
	res := m.callCtx(m.t.Context(), name, args)
	text := textOf(m.t, res)
	if !res.IsError {
		m.t.Fatalf("%s(%s) = %s, want a tool error", name, args, text)
	}
	if res.StructuredContent != nil {
		m.t.Errorf("%s: tool error carries structured content %v", name, res.StructuredContent)
	}
	return text
}

// wantErr checks that a call fails with exactly msg, in FastMCP's words.
func (m *mcpc) wantErr(name, args, msg string) {
	m.t.Helper()
	want := "Error calling tool '" + name + "': " + msg
	if got := m.fail(name, args); got != want {
		m.t.Errorf("%s(%s) error\n got %s\nwant %s", name, args, got, want)
	}
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result has %d contents, want 1 text: %+v", len(res.Content), res)
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// topKeys returns the keys of a JSON object in order.
func topKeys(t *testing.T, text string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("result %s is not an object", text)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// field returns one field of a JSON object result, as JSON.
func field(t *testing.T, text, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatal(err)
	}
	v, ok := m[name]
	if !ok {
		t.Fatalf("result %s has no field %q", text, name)
	}
	return string(v)
}

// str returns a string field of a JSON object result.
func str(t *testing.T, text, name string) string {
	t.Helper()
	var s string
	if err := json.Unmarshal([]byte(field(t, text, name)), &s); err != nil {
		t.Fatalf("field %q of %s is not a string", name, text)
	}
	return s
}

// equal fails unless got == want.
func equal(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s\n got %s\nwant %s", what, got, want)
	}
}

// epoch is statetest.Epoch in epoch seconds, as the tools write it.
const epoch = "1893456000"
