package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/internal/syncbuf"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// call calls a tool that must succeed and returns its text.
func call(t *testing.T, c *client.Client, name, args string) string {
	t.Helper()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = name, json.RawMessage(args)
	res, err := c.CallTool(t.Context(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := res.Content[0].(mcp.TextContent).Text
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, text)
	}
	return text
}

func start(t *testing.T, c *client.Client) *client.Client {
	t.Helper()
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Initialize(t.Context(), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// check proves both kinds of tool are listed and callable.
func check(t *testing.T, c *client.Client) {
	t.Helper()
	lt, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range lt.Tools {
		names[tl.Name] = true
	}
	if len(lt.Tools) != 22 || !names["shout"] {
		t.Fatalf("tools/list has %d tools (shout: %v), want shout and the 21 state tools", len(lt.Tools), names["shout"])
	}
	for _, n := range mcpadapter.ToolNames() {
		if !names[Prefix+n] {
			t.Errorf("tools/list lacks %s", Prefix+n)
		}
	}
	if got := call(t, c, "shout", `{"text":"ship it"}`); got != "SHIP IT" {
		t.Errorf("shout = %q", got)
	}
	if got := call(t, c, Prefix+"state_set", `{"key":"k","value":{"n":12345678901234567890}}`); got != `{"ok":true,"version":1}` {
		t.Errorf("state_set = %s", got)
	}
	if got := call(t, c, Prefix+"state_get", `{"key":"k"}`); !strings.HasPrefix(got, `{"key":"k","value":{"n":12345678901234567890},"found":true`) {
		t.Errorf("state_get = %s", got)
	}
}

func TestMountedInProcess(t *testing.T) {
	st, _ := statetest.NewStore(t)
	c, err := client.NewInProcessClient(newServer(st))
	if err != nil {
		t.Fatal(err)
	}
	check(t, start(t, c))
}

func TestMountedOverHTTP(t *testing.T) {
	st, _ := statetest.NewStore(t)
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(newServer(st), server.WithStateLess(true), server.WithDisableStreaming(true)))
	hs := httptest.NewServer(mux)
	defer hs.Close()
	c, err := client.NewStreamableHttpClient(hs.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	check(t, start(t, c))
}

func TestRunRejectsABadStoreURL(t *testing.T) {
	if err := run("nosuch://x", "", nil); err == nil || !strings.Contains(err.Error(), "opening the store") {
		t.Errorf("run with a bad store URL: %v", err)
	}
}

// On stdio it says so on stderr (its log), where a person who started it
// in a terminal sees it; stdout carries only JSON-RPC.
func TestStdioSaysSo(t *testing.T) {
	null, err := os.Open(os.DevNull) // no requests: the input ends at once
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	stdin := os.Stdin
	os.Stdin = null
	defer func() { os.Stdin = stdin }()
	var logged syncbuf.Buffer
	if err := run("mem://", "", slog.New(slog.NewTextHandler(&logged, nil))); err != nil {
		t.Fatalf("run on stdio with no input: %v", err)
	}
	if !strings.Contains(logged.String(), "serving MCP over stdio") {
		t.Errorf("the log does not say it speaks stdio:\n%s", logged.String())
	}
}
