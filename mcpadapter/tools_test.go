package mcpadapter_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// contract is the Python sidecar's tool surface (python-sidecar.md §1) and
// this project's additions (SPEC.md §4): parameters in order, "*" marking
// required ones, result fields in order, and annotations.
var contract = []struct {
	name    string
	params  []string
	fields  []string
	hints   string // r = read-only, d = destructive, i = idempotent
	pyCount int    // how many of params and fields the Python sidecar had
}{
	{"state_set", []string{"key*", "value*", "ttl_seconds", "agent_id", "if_version"}, []string{"ok", "version"}, "i", 4},
	{"state_get", []string{"key*"}, []string{"key", "value", "found", "version", "agent_id", "updated_at", "expires_at"}, "ri", 1},
	{"state_delete", []string{"key*", "if_version"}, []string{"ok"}, "di", 1},
	{"state_list", []string{"prefix", "limit", "cursor"}, []string{"keys", "next_cursor"}, "ri", 1},
	{"workflow_create", []string{"name*", "tags", "parent_run_id", "join", "idempotency_key"}, []string{"run_id", "name", "status", "replayed"}, "", 2},
	{"workflow_discover", []string{"tags", "status", "claimable", "parent_run_id", "limit", "cursor"}, []string{"runs", "next_cursor"}, "ri", 2},
	{"workflow_claim", []string{"run_id*", "agent_id*", "claim_ttl_seconds"}, []string{"claimed", "run_id", "agent_id", "reason", "fence", "attempt", "expires_at"}, "", 2},
	{"workflow_checkpoint", []string{"run_id*", "step*", "output*", "agent_id", "fence", "status"}, []string{"ok", "run_id", "step"}, "i", 3},
	{"workflow_resume", []string{"run_id*"}, []string{"run_id", "last_step", "step_outputs", "meta"}, "ri", 1},
	{"workflow_status", []string{"run_id*"}, []string{"run_id", "status", "last_step", "agent_id", "created_at", "updated_at", "attempt", "fence", "claim_expires_at", "parent_run_id", "join", "children"}, "ri", 1},
	{"workflow_list", []string{"limit", "cursor"}, []string{"runs", "next_cursor"}, "ri", 0},
	{"lease_acquire", []string{"resource_id*", "holder_id*", "ttl_seconds*"}, []string{"acquired", "resource_id", "holder", "expires_at", "reason", "fence"}, "", 3},
	{"lease_release", []string{"resource_id*", "holder_id*"}, []string{"released", "resource_id"}, "i", 2},
	{"lease_renew", []string{"resource_id*", "holder_id*", "ttl_seconds*"}, []string{"renewed", "resource_id", "expires_at"}, "", 3},
	{"sidecar_health", nil, []string{"status", "backend", "uptime_s", "key_count", "workflow_count", "version", "lease_count", "session_count", "history_count", "workflows_by_status", "namespace"}, "ri", 0},
	{"sidecar_reset", nil, []string{"ok", "cleared"}, "di", 0},
	{"session_save", []string{"session_id*", "context*"}, []string{"ok", "session_id"}, "i", 2},
	{"session_restore", []string{"session_id*"}, []string{"found", "session_id", "context"}, "ri", 1},
	{"history_log", []string{"key", "n"}, []string{"entries", "total"}, "ri", 2},
	{"state_wait", []string{"key*", "after_version", "timeout_seconds"}, []string{"changed", "key", "value", "found", "version", "agent_id", "updated_at", "expires_at"}, "ri", 0},
	{"workflow_wait", []string{"run_id*", "until", "timeout_seconds"}, []string{"reached", "run_id", "status", "last_step", "agent_id", "created_at", "updated_at", "attempt", "fence", "claim_expires_at"}, "ri", 0},
}

// runFields are the fields of a run object, Python's WorkflowMeta first.
var runFields = []string{"run_id", "name", "status", "tags", "agent_id", "last_step", "created_at", "updated_at", "attempt", "fence", "claim_expires_at"}

func TestToolNames(t *testing.T) {
	var want []string
	for _, c := range contract {
		want = append(want, c.name)
	}
	if got := mcpadapter.ToolNames(); !slices.Equal(got, want) {
		t.Errorf("ToolNames() = %v, want the Python registration order %v", got, want)
	}
}

func TestToolsList(t *testing.T) {
	c, _, _ := newClient(t, nil)
	lt, err := c.c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lt.Tools) != 21 {
		t.Fatalf("tools/list has %d tools, want 21", len(lt.Tools))
	}
	tools := map[string]mcp.Tool{}
	for _, tl := range lt.Tools {
		tools[tl.Name] = tl
	}
	for _, want := range contract {
		tl, ok := tools[want.name]
		if !ok {
			t.Errorf("tools/list lacks %s", want.name)
			continue
		}
		var params, required []string
		for _, p := range want.params {
			name, req := strings.CutSuffix(p, "*")
			params = append(params, name)
			if req {
				required = append(required, name)
			}
		}
		in := tl.InputSchema
		if in.Type != "object" || !slices.Equal(in.PropertyOrder, params) && len(params) > 0 || !slices.Equal(in.Required, required) {
			t.Errorf("%s input schema: params %v required %v, want %v and %v", want.name, in.PropertyOrder, in.Required, params, required)
		}
		if in.AdditionalProperties != false {
			t.Errorf("%s input schema allows unknown arguments", want.name)
		}
		out := tl.OutputSchema
		if out.Type != "object" || !slices.Equal(out.PropertyOrder, want.fields) || !slices.Equal(out.Required, want.fields) {
			t.Errorf("%s output schema: fields %v required %v, want all of %v", want.name, out.PropertyOrder, out.Required, want.fields)
		}
		a := tl.Annotations
		hint := func(p *bool) bool { return p != nil && *p }
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s annotations %+v: every hint must be set", want.name, a)
			continue
		}
		if hint(a.ReadOnlyHint) != strings.Contains(want.hints, "r") || hint(a.DestructiveHint) != strings.Contains(want.hints, "d") ||
			hint(a.IdempotentHint) != strings.Contains(want.hints, "i") || hint(a.OpenWorldHint) {
			t.Errorf("%s annotations readOnly=%v destructive=%v idempotent=%v openWorld=%v, want %q", want.name,
				*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint, want.hints)
		}
		if tl.Description == "" || a.Title == "" {
			t.Errorf("%s has no description or title", want.name)
		}
	}
	for _, name := range []string{"workflow_discover", "workflow_list"} {
		runs := tools[name].OutputSchema.Properties["runs"].(map[string]any)["items"].(map[string]any)
		if got, want := propertyNames(t, runs), slices.Sorted(slices.Values(runFields)); !slices.Equal(got, want) {
			t.Errorf("%s run object fields %v, want %v", name, got, want)
		}
	}
}

// propertyNames returns the property names of a nested schema, sorted
// (mcp-go decodes nested schemas into maps, which lose the order; the
// order of run objects is checked on the results themselves).
func propertyNames(t *testing.T, schema map[string]any) []string {
	t.Helper()
	b, _ := json.Marshal(schema)
	var s mcp.ToolOutputSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return slices.Sorted(slices.Values(s.PropertyOrder))
}

// TestOutputSchemasAreChecked proves the output schemas compile and are
// enforced: a wrong result fails validation (mcp-go silently skips schemas
// that do not compile, so a passing call alone would prove nothing).
func TestOutputSchemasAreChecked(t *testing.T) {
	st, _ := statetest.NewStore(t)
	s := server.NewMCPServer("probe", "1", server.WithOutputSchemaValidation())
	for _, tl := range mcpadapter.Tools(st, nil) {
		tl.Handler = func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent("{}")}, StructuredContent: map[string]any{}}, nil
		}
		s.AddTools(tl)
	}
	c := connect(t, s)
	for _, name := range mcpadapter.ToolNames() {
		res := c.callCtx(t.Context(), name, `{}`)
		if text := textOf(t, res); !res.IsError || !strings.Contains(text, "output schema validation failed") {
			t.Errorf("%s returning {} = %s, want an output schema validation failure", name, text)
		}
	}
}

// TestInputSchemasAcceptValidCalls runs every tool with every argument on a
// server that validates arguments against the input schemas too.
func TestInputSchemasAcceptValidCalls(t *testing.T) {
	st, _ := statetest.NewStore(t)
	c := connect(t, mcpadapter.NewServer(st, &mcpadapter.Options{AllowReset: true},
		server.WithInputSchemaValidation(), server.WithOutputSchemaValidation()))
	c.ok("state_set", `{"key":"k","value":{"a":[1,null]},"ttl_seconds":1.5,"agent_id":"A","if_version":0}`)
	c.ok("state_get", `{"key":"k"}`)
	c.ok("state_list", `{"prefix":"k","limit":10}`)
	c.ok("state_delete", `{"key":"k","if_version":1}`)
	c.ok("state_set", `{"key":"k","value":null}`)
	id := str(t, c.ok("workflow_create", `{"name":"n","tags":{"a":"b"}}`), "run_id")
	c.ok("workflow_discover", `{"tags":{"a":"b"},"status":"created","claimable":true,"limit":5}`)
	fence := field(t, c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A","claim_ttl_seconds":30}`), "fence")
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":0,"output":"x","agent_id":"A","fence":`+fence+`}`)
	c.ok("workflow_resume", `{"run_id":"`+id+`"}`)
	c.ok("workflow_status", `{"run_id":"`+id+`"}`)
	c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":1,"output":{},"status":"done"}`)
	c.ok("workflow_list", `{"limit":1}`)
	c.ok("lease_acquire", `{"resource_id":"r","holder_id":"A","ttl_seconds":10}`)
	c.ok("lease_renew", `{"resource_id":"r","holder_id":"A","ttl_seconds":10}`)
	c.ok("lease_release", `{"resource_id":"r","holder_id":"A"}`)
	c.ok("session_save", `{"session_id":"s","context":{"x":1}}`)
	c.ok("session_restore", `{"session_id":"s"}`)
	c.ok("history_log", `{"key":"k","n":3}`)
	c.ok("sidecar_health", `{}`)
	c.ok("sidecar_reset", `{}`)
	if text := c.fail("state_get", `{"key":"k","bogus":1}`); !strings.Contains(text, "bogus") {
		t.Errorf("unknown argument with input validation: %s, want it named", text)
	}
}
