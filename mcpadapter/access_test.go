package mcpadapter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
)

// writeArgs are valid arguments of every tool that changes state, over the
// records seedAccess writes: without the access check each call would
// succeed. A tool missing here (a new one) is called with {}: the check
// comes before the arguments are read.
func writeArgs(run string) map[string]string {
	return map[string]string{
		"state_set":           `{"key":"new","value":1}`,
		"state_delete":        `{"key":"seed"}`,
		"workflow_create":     `{"name":"n"}`,
		"workflow_claim":      fmt.Sprintf(`{"run_id":%q,"agent_id":"a"}`, run),
		"workflow_checkpoint": fmt.Sprintf(`{"run_id":%q,"step":1,"output":1}`, run),
		"lease_acquire":       `{"resource_id":"r","holder_id":"h","ttl_seconds":10}`,
		"lease_release":       `{"resource_id":"seedlease","holder_id":"h"}`,
		"lease_renew":         `{"resource_id":"seedlease","holder_id":"h","ttl_seconds":10}`,
		"sidecar_reset":       `{}`,
		"session_save":        `{"session_id":"s","context":{}}`,
	}
}

func seedAccess(t *testing.T, st *state.Store) string {
	t.Helper()
	ctx := t.Context()
	if _, err := st.Set(ctx, "seed", 1); err != nil {
		t.Fatal(err)
	}
	r, err := st.CreateRun(ctx, "seed", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.TryAcquireLease(ctx, "seedlease", "h", time.Minute); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func TestReadOnlyCallerCannotWriteThroughAnyTool(t *testing.T) {
	m, st, _ := newClient(t, &mcpadapter.Options{AllowReset: true})
	args := writeArgs(seedAccess(t, st))
	before, err := st.History(t.Context(), state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	reader := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "alice", Access: mcpadapter.AccessRead, Scopes: []string{"state:read"}})
	writes := 0
	for _, name := range mcpadapter.ToolNames() {
		need, ok := mcpadapter.ToolAccess(name)
		if !ok {
			t.Fatalf("ToolAccess(%s) unknown", name)
		}
		if need == mcpadapter.AccessRead {
			continue
		}
		writes++
		a, ok := args[name]
		if !ok {
			a = `{}`
		}
		res := m.callCtx(reader, name, a)
		text := textOf(t, res)
		if !res.IsError || !strings.Contains(text, "permission denied: "+name+" needs "+need.String()+" access") ||
			!strings.Contains(text, "scopes: state:read") {
			t.Errorf("%s as a reader: %s", name, text)
		}
	}
	if writes < len(args) {
		t.Fatalf("only %d tools need more than read access, want at least %d", writes, len(args))
	}
	after, err := st.History(t.Context(), state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("a refused call wrote: %d history entries before, %d after", len(before), len(after))
	}
	// The same calls by an admin succeed: the arguments were valid.
	admin := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "root", Access: mcpadapter.AccessAdmin})
	for _, name := range []string{"state_set", "state_delete", "workflow_create", "workflow_claim", "workflow_checkpoint",
		"lease_acquire", "lease_renew", "lease_release", "session_save", "sidecar_reset"} {
		m.okCtx(admin, name, args[name])
	}
}

func TestReadOnlyCallerReads(t *testing.T) {
	m, st, _ := newClient(t, nil)
	seedAccess(t, st)
	reader := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "alice", Access: mcpadapter.AccessRead})
	if got := m.okCtx(reader, "state_get", `{"key":"seed"}`); !strings.Contains(got, `"found":true`) {
		t.Fatalf("state_get = %s", got)
	}
	m.okCtx(reader, "history_log", `{}`)
	m.okCtx(reader, "sidecar_health", ``)
}

func TestWriterIsNotAdmin(t *testing.T) {
	m, _, _ := newClient(t, &mcpadapter.Options{AllowReset: true})
	writer := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "bob", Access: mcpadapter.AccessWrite})
	m.okCtx(writer, "state_set", `{"key":"k","value":1}`)
	res := m.callCtx(writer, "sidecar_reset", ``)
	if text := textOf(t, res); !res.IsError || !strings.Contains(text, "sidecar_reset needs admin access and this caller has write access") {
		t.Fatalf("sidecar_reset as a writer: %s", text)
	}
}

func TestToolsListShowsCallersTools(t *testing.T) {
	m, _, _ := newClient(t, &mcpadapter.Options{Prefix: "st."})
	list := func(ctx context.Context) []string {
		t.Helper()
		lt, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range lt.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	want := func(max mcpadapter.Access) []string {
		var out []string
		for _, n := range mcpadapter.ToolNames() {
			if a, _ := mcpadapter.ToolAccess(n); a <= max {
				out = append(out, "st."+n)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, a := range []mcpadapter.Access{mcpadapter.AccessNone, mcpadapter.AccessRead, mcpadapter.AccessWrite, mcpadapter.AccessAdmin} {
		got := list(mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Access: a}))
		slices.Sort(got)
		if !slices.Equal(got, want(a)) {
			t.Errorf("tools/list for %s: %v, want %v", a, got, want(a))
		}
	}
	if got := list(t.Context()); len(got) != len(mcpadapter.ToolNames()) {
		t.Errorf("tools/list without a caller shows %d tools, want all %d", len(got), len(mcpadapter.ToolNames()))
	}
	if n := len(want(mcpadapter.AccessRead)); n < 9 || n >= len(mcpadapter.ToolNames()) {
		t.Errorf("%d read-only tools", n)
	}
}

func TestAuthorizeHook(t *testing.T) {
	var seen []string
	m, _, _ := newClient(t, &mcpadapter.Options{Authorize: func(ctx context.Context, tool string, need mcpadapter.Access) error {
		c, _ := mcpadapter.CallerFrom(ctx)
		seen = append(seen, fmt.Sprintf("%s/%s/%s", c.Principal, tool, need))
		if tool == "state_delete" {
			return fmt.Errorf("%w: deletes are off today", mcpadapter.ErrForbidden)
		}
		return nil
	}})
	ctx := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "p", Access: mcpadapter.AccessNone})
	m.okCtx(ctx, "state_set", `{"key":"k","value":1}`)
	res := m.callCtx(ctx, "state_delete", `{"key":"k"}`)
	if text := textOf(t, res); !res.IsError || !strings.Contains(text, "permission denied: deletes are off today") {
		t.Fatalf("state_delete: %s", text)
	}
	if !slices.Contains(seen, "p/state_set/write") || !slices.Contains(seen, "p/state_delete/write") {
		t.Fatalf("Authorize saw %v", seen)
	}
	if !errors.Is(mcpadapter.DeniedError("x", mcpadapter.AccessWrite, mcpadapter.Caller{}), mcpadapter.ErrForbidden) {
		t.Fatal("DeniedError does not wrap ErrForbidden")
	}
}

func TestCallerPrincipalInHistory(t *testing.T) {
	m, _, _ := newClient(t, nil)
	ctx := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "alice@example.com", Access: mcpadapter.AccessWrite})
	m.okCtx(ctx, "state_set", `{"key":"k","value":1,"agent_id":"planner-1"}`)
	m.ok("state_set", `{"key":"k","value":2,"agent_id":"planner-2"}`) // no caller: no principal
	got := m.ok("history_log", `{"key":"k"}`)
	if !strings.Contains(got, `"agent_id":"planner-2","written_at":`) || !strings.Contains(got, `"op":"kv.set"}`) ||
		!strings.Contains(got, `"agent_id":"planner-1","written_at":`) || !strings.Contains(got, `"op":"kv.set","principal":"alice@example.com"}`) {
		t.Fatalf("history_log = %s", got)
	}
}

// sidecar_erase, offered after the 21, needs admin: a writer neither lists
// nor calls it.
func TestEraseNeedsAdmin(t *testing.T) {
	m, _, _ := newClient(t, &mcpadapter.Options{AllowErase: true})
	if a, ok := mcpadapter.ToolAccess("sidecar_erase"); !ok || a != mcpadapter.AccessAdmin {
		t.Fatalf("ToolAccess(sidecar_erase) = %v, %v", a, ok)
	}
	for _, a := range []mcpadapter.Access{mcpadapter.AccessRead, mcpadapter.AccessWrite, mcpadapter.AccessAdmin} {
		ctx := mcpadapter.WithCaller(t.Context(), mcpadapter.Caller{Principal: "p", Access: a})
		lt, err := m.c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		listed := slices.ContainsFunc(lt.Tools, func(tl mcp.Tool) bool { return tl.Name == "sidecar_erase" })
		if listed != (a == mcpadapter.AccessAdmin) {
			t.Errorf("%s caller: sidecar_erase listed = %v", a, listed)
		}
		if a == mcpadapter.AccessAdmin {
			continue
		}
		res := m.callCtx(ctx, "sidecar_erase", `{"subject":"alice"}`)
		if text := textOf(t, res); !res.IsError || !strings.Contains(text, "permission denied: sidecar_erase needs admin access") {
			t.Errorf("%s caller: sidecar_erase = %s", a, text)
		}
	}
}
