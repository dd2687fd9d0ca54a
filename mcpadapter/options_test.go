package mcpadapter_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

func TestPrefix(t *testing.T) {
	c, _, _ := newClient(t, &mcpadapter.Options{Prefix: "state."})
	lt, err := c.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lt.Tools {
		names = append(names, tl.Name)
	}
	for _, n := range mcpadapter.ToolNames() {
		if !slices.Contains(names, "state."+n) {
			t.Errorf("tools/list %v lacks state.%s", names, n)
		}
	}
	equal(t, "prefixed state_set", c.ok("state.state_set", `{"key":"k","value":1}`), `{"ok":true,"version":1}`)
	c.wantErr("state.state_get", `{}`, "key is required")
	if _, err := c.c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "state_get"}}); err == nil {
		t.Error("the unprefixed name answered too")
	}
}

func TestToolsSubset(t *testing.T) {
	c, _, _ := newClient(t, &mcpadapter.Options{Tools: []string{"sidecar_health", "state_get"}})
	lt, err := c.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 2 {
		t.Fatalf("tools/list has %d tools, want the 2 selected", len(lt.Tools))
	}
	c.ok("state_get", `{"key":"k"}`)
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = "state_set", map[string]any{"key": "k", "value": 1}
	if _, err := c.c.CallTool(t.Context(), req); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("calling an unselected tool: %v, want tool not found", err)
	}
	st, _ := statetest.NewStore(t)
	if n := len(mcpadapter.Tools(st, &mcpadapter.Options{Tools: []string{}})); n != 0 {
		t.Errorf("Tools with an empty selection gave %d tools", n)
	}
}

func TestToolsPanicsOnMisconfiguration(t *testing.T) {
	st, _ := statetest.NewStore(t)
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"unknown tool", func() { mcpadapter.Tools(st, &mcpadapter.Options{Tools: []string{"state_sett"}}) }, `unknown tool "state_sett"`},
		{"bad prefix", func() { mcpadapter.Tools(st, &mcpadapter.Options{Prefix: "state/"}) }, `Options.Prefix "state/"`},
		{"nil store", func() { mcpadapter.Tools(nil, nil) }, "nil *state.Store"},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Errorf("%s: panic %v, want one mentioning %s", tc.name, r, tc.want)
				}
			}()
			tc.f()
		}()
	}
}

func TestObserve(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []string
	)
	c, _, _ := newClient(t, &mcpadapter.Options{Prefix: "s_", Observe: func(tool string, took time.Duration, isError bool) {
		mu.Lock()
		defer mu.Unlock()
		if took < 0 {
			t.Errorf("%s took %v", tool, took)
		}
		calls = append(calls, fmt.Sprint(tool, " ", isError))
	}})
	c.ok("s_state_set", `{"key":"k","value":1}`)
	c.fail("s_state_get", `{}`)
	c.fail("s_sidecar_reset", ``)
	c.ok("s_workflow_claim", `{"run_id":"wf-000000000000","agent_id":"A"}`)
	mu.Lock()
	defer mu.Unlock()
	want := []string{"state_set false", "state_get true", "sidecar_reset true", "workflow_claim false"}
	if !slices.Equal(calls, want) {
		t.Errorf("Observe saw %v, want %v", calls, want)
	}
}

func TestNamespaces(t *testing.T) {
	c, _, _ := newClient(t, &mcpadapter.Options{AllowReset: true})
	ctxA := mcpadapter.WithNamespace(t.Context(), "tenant-a")
	ctxB := mcpadapter.WithNamespace(t.Context(), "tenant-b")
	if ns, ok := mcpadapter.NamespaceFrom(ctxA); !ok || ns != "tenant-a" {
		t.Fatalf("NamespaceFrom = %q, %v", ns, ok)
	}
	if _, ok := mcpadapter.NamespaceFrom(t.Context()); ok {
		t.Fatal("NamespaceFrom found a namespace in a bare context")
	}
	c.okCtx(ctxA, "state_set", `{"key":"k","value":"a"}`)
	c.okCtx(ctxA, "workflow_create", `{"name":"job"}`)
	c.okCtx(ctxA, "lease_acquire", `{"resource_id":"r","holder_id":"A","ttl_seconds":10}`)
	c.ok("state_set", `{"key":"k","value":"default"}`)

	equal(t, "k in tenant-a", field(t, c.okCtx(ctxA, "state_get", `{"key":"k"}`), "value"), `"a"`)
	equal(t, "k in tenant-b", field(t, c.okCtx(ctxB, "state_get", `{"key":"k"}`), "found"), "false")
	equal(t, "k in the store's namespace", field(t, c.ok("state_get", `{"key":"k"}`), "value"), `"default"`)
	equal(t, "runs in tenant-b", c.okCtx(ctxB, "workflow_list", ``), `{"runs":[],"next_cursor":null}`)
	equal(t, "lease in tenant-b", field(t, c.okCtx(ctxB, "lease_acquire", `{"resource_id":"r","holder_id":"B","ttl_seconds":10}`), "acquired"), "true")

	h := c.okCtx(ctxA, "sidecar_health", ``)
	equal(t, "namespace of tenant-a's health", field(t, h, "namespace"), `"tenant-a"`)
	equal(t, "keys of tenant-a", field(t, h, "key_count"), "1")
	c.okCtx(ctxA, "sidecar_reset", ``)
	equal(t, "k in the store's namespace after tenant-a's reset", field(t, c.ok("state_get", `{"key":"k"}`), "found"), "true")

	res := c.callCtx(mcpadapter.WithNamespace(t.Context(), "no spaces"), "state_get", `{"key":"k"}`)
	if text := textOf(t, res); !res.IsError || !strings.HasPrefix(text, "Error calling tool 'state_get': namespace may contain only") {
		t.Errorf("call in an invalid namespace = %s, want a tool error about the namespace", text)
	}
}

func TestClaimTTLIsDescribed(t *testing.T) {
	st, _ := statetest.NewStore(t)
	for _, tl := range mcpadapter.Tools(st, &mcpadapter.Options{ClaimTTL: 90 * time.Second, Tools: []string{"workflow_claim"}}) {
		if !strings.Contains(string(tl.Tool.RawInputSchema), "Defaults to 90.") {
			t.Errorf("workflow_claim input schema %s does not give the configured default", tl.Tool.RawInputSchema)
		}
	}
}
