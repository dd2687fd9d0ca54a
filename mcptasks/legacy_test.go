package mcptasks

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/internal/storetest"
)

// Tests of the 2025-11-25 shapes and rules, over raw JSON-RPC.

func TestLegacyCapabilities(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := legacyClient(t, "alice")
	init := c.ok(r.url, "initialize", map[string]any{"protocolVersion": mcp.ProtocolVersion20251125,
		"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
	caps, _ := json.Marshal(init["capabilities"].(map[string]any)["tasks"])
	if string(caps) != `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}` {
		t.Fatalf("capabilities.tasks = %s", caps)
	}
	tools := c.ok(r.url, "tools/list", nil)["tools"].([]any)
	for _, tl := range tools {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		if ex["taskSupport"] != "optional" {
			t.Fatalf("tool %s: execution %v, want taskSupport optional", m["name"], m["execution"])
		}
	}
}

func TestLegacyLifecycle(t *testing.T) {
	g := newGate()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, nil)
	c := legacyClient(t, "alice")

	res := c.ok(r.url, "tools/call", map[string]any{"name": "slow", "task": map[string]any{"ttl": 60000}})
	task := res["task"].(map[string]any)
	id := task["taskId"].(string)
	if task["status"] != "working" || task["ttl"] != float64(60000) || task["pollInterval"] != float64(1000) {
		t.Fatalf("CreateTaskResult.task = %v", task)
	}
	for _, f := range []string{"createdAt", "lastUpdatedAt"} {
		if _, err := time.Parse(time.RFC3339, task[f].(string)); err != nil {
			t.Fatalf("%s %q is not ISO 8601: %v", f, task[f], err)
		}
	}
	if len(res) != 1 {
		t.Fatalf("CreateTaskResult has %v beside task", res)
	}
	g.waitStarted(t, 1)
	if got := c.get(r.url, id); got["status"] != "working" || got["taskId"] != id || got["ttl"] != float64(60000) {
		t.Fatalf("tasks/get = %v", got)
	}
	// params.taskId decides, not a related-task _meta naming another task.
	other := c.create(r.url, "echo", nil)
	got := c.ok(r.url, "tasks/get", map[string]any{"taskId": id,
		"_meta": map[string]any{mcp.RelatedTaskMetaKey: map[string]any{"taskId": other}}})
	if got["taskId"] != id {
		t.Fatalf("tasks/get followed the related-task metadata: %v", got)
	}
	// A notifications/cancelled does not reach a task's call, whatever id
	// it names.
	for _, rid := range []any{id, "mcptasks-" + id, 1} {
		c.notify(r.url, "notifications/cancelled", map[string]any{"requestId": rid, "reason": "no"})
	}
	if got := c.get(r.url, id); got["status"] != "working" {
		t.Fatalf("after notifications/cancelled: %v", got)
	}
	// tasks/result blocks while the task works; it returns once released.
	done := make(chan map[string]any, 1)
	go func() { done <- c.ok(r.url, "tasks/result", map[string]any{"taskId": id}) }()
	waitWaiting(t, r.tasks, 1)
	select {
	case m := <-done:
		t.Fatalf("tasks/result answered before the task finished: %v", m)
	default:
	}
	g.release()
	out := <-done
	if text := out["content"].([]any)[0].(map[string]any)["text"]; text != "done 1" {
		t.Fatalf("tasks/result = %v", out)
	}
	rel := out["_meta"].(map[string]any)[mcp.RelatedTaskMetaKey].(map[string]any)
	if rel["taskId"] != id {
		t.Fatalf("tasks/result _meta related-task = %v", rel)
	}
	if got := c.get(r.url, id); got["status"] != "completed" {
		t.Fatalf("after the result, tasks/get = %v", got)
	}
	list := c.ok(r.url, "tasks/list", nil)["tasks"].([]any)
	if len(list) != 2 || list[1].(map[string]any)["taskId"] != id && list[0].(map[string]any)["taskId"] != id {
		t.Fatalf("tasks/list = %v", list)
	}
	// Cancelling a finished task is refused.
	code, msg, _ := c.fail(r.url, "tasks/cancel", map[string]any{"taskId": id})
	if code != -32602 || !strings.Contains(msg, "terminal status 'completed'") {
		t.Fatalf("cancel of a completed task: %d %q", code, msg)
	}
}

// waitWaiting waits until ts's store has n waiters (a tasks/result
// waiting without polling).
func waitWaiting(t *testing.T, ts *Tasks, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for ts.st.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", ts.st.Waiting(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLegacyResultsExact: a task's outcome is what the plain call returns:
// isError true is a completed task with that result; a JSON-RPC error is a
// failed task whose tasks/result is that error.
func TestLegacyResultsExact(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := legacyClient(t, "alice")
	for _, tool := range []string{"echo", "toolerr"} {
		plain := c.ok(r.url, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"text": "x"}})
		id := c.create(r.url, tool, map[string]any{"text": "x"})
		c.until(r.url, id, "completed")
		got := c.ok(r.url, "tasks/result", map[string]any{"taskId": id})
		delete(got, "_meta")
		if !reflect.DeepEqual(got, plain) {
			t.Fatalf("%s: tasks/result %v, plain call %v", tool, got, plain)
		}
	}
	_, plain := c.send(r.url, "tools/call", map[string]any{"name": "boom"}, "")
	id := c.create(r.url, "boom", nil)
	got := c.until(r.url, id, "failed", "completed")
	if got["status"] != "failed" || !strings.Contains(got["statusMessage"].(string), "boom") {
		t.Fatalf("a JSON-RPC error must fail the task: %v", got)
	}
	_, res := c.send(r.url, "tasks/result", map[string]any{"taskId": id}, "")
	if !reflect.DeepEqual(res["error"], plain["error"]) {
		t.Fatalf("tasks/result error %v, plain call error %v", res["error"], plain["error"])
	}
}

func TestLegacyErrors(t *testing.T) {
	g := newGate()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, &Options{MaxTTL: 2 * time.Hour, MaxLive: 2})
	c := legacyClient(t, "alice")
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		for _, id := range []any{newID(), "nope", 7} {
			code, msg, status := c.fail(r.url, m, map[string]any{"taskId": id})
			if code != -32602 || status != 200 {
				t.Fatalf("%s %v: %d %q (HTTP %d), want -32602", m, id, code, msg, status)
			}
		}
	}
	code, _, _ := c.fail(r.url, "tasks/update", map[string]any{"taskId": newID()})
	if code != -32601 {
		t.Fatalf("tasks/update in 2025-11-25: %d, want -32601", code)
	}
	code, msg, _ := c.fail(r.url, "tasks/list", map[string]any{"cursor": "garbage"})
	if code != -32602 {
		t.Fatalf("tasks/list with a bad cursor: %d %q", code, msg)
	}
	for _, ttl := range []any{-1, 0, 1.5, "60"} {
		code, msg, _ := c.fail(r.url, "tools/call", map[string]any{"name": "echo", "task": map[string]any{"ttl": ttl}})
		if code != -32602 || !strings.Contains(msg, "params.task.ttl") {
			t.Fatalf("ttl %v: %d %q", ttl, code, msg)
		}
	}
	// A ttl above the maximum is cut to it, and the task says so.
	res := c.ok(r.url, "tools/call", map[string]any{"name": "slow", "task": map[string]any{"ttl": 1e12}})
	if ttl := res["task"].(map[string]any)["ttl"]; ttl != float64(2*time.Hour/time.Millisecond) {
		t.Fatalf("ttl %v, want the maximum", ttl)
	}
	// No ttl: the default.
	res = c.ok(r.url, "tools/call", map[string]any{"name": "slow", "task": map[string]any{}})
	if ttl := res["task"].(map[string]any)["ttl"]; ttl != float64(time.Hour/time.Millisecond) {
		t.Fatalf("ttl %v, want the default", ttl)
	}
	// Two live tasks: a third is refused, clearly.
	code, msg, _ = c.fail(r.url, "tools/call", map[string]any{"name": "slow", "task": map[string]any{}})
	if code != -32600 || !strings.Contains(msg, "too many live tasks") {
		t.Fatalf("a third live task: %d %q", code, msg)
	}
	// Someone else is not limited by alice's tasks.
	legacyClient(t, "bob").create(r.url, "echo", nil)
	g.release()
}

// TestLegacyCancel: tasks/cancel answers the task as cancelled, the call's
// context ends, and the task stays cancelled.
func TestLegacyCancel(t *testing.T) {
	g := newGate()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, nil)
	c := legacyClient(t, "alice")
	id := c.create(r.url, "slow", nil)
	g.waitStarted(t, 1)
	res := c.ok(r.url, "tasks/cancel", map[string]any{"taskId": id})
	if res["status"] != "cancelled" || res["taskId"] != id {
		t.Fatalf("tasks/cancel = %v", res)
	}
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.ctxErrs) == 1 })
	if !errors.Is(g.ctxErrs[0], errEnded) {
		t.Fatalf("the call's context ended with %v, want the task's cancellation", g.ctxErrs[0])
	}
	waitFor(t, func() bool { return r.tasks.Running() == 0 })
	g.release()
	if got := c.get(r.url, id); got["status"] != "cancelled" {
		t.Fatalf("after cancel, tasks/get = %v", got)
	}
	if code, _, _ := c.fail(r.url, "tasks/cancel", map[string]any{"taskId": id}); code != -32602 {
		t.Fatalf("a second cancel: %d, want -32602", code)
	}
	code, msg, _ := c.fail(r.url, "tasks/result", map[string]any{"taskId": id})
	if code != -32602 || !strings.Contains(msg, "cancelled") {
		t.Fatalf("tasks/result of a cancelled task: %d %q", code, msg)
	}
}

// waitFor waits until cond holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLegacyList: tasks/list pages the caller's tasks with nextCursor,
// newest first, and lists every task tasks/get finds.
func TestLegacyList(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := legacyClient(t, "alice")
	want := map[string]bool{}
	for range listPage + 10 {
		want[c.create(r.url, "echo", nil)] = true
	}
	legacyClient(t, "bob").create(r.url, "echo", nil)
	first := c.ok(r.url, "tasks/list", nil)
	next, _ := first["nextCursor"].(string)
	if len(first["tasks"].([]any)) != listPage || next == "" {
		t.Fatalf("first page: %d tasks, nextCursor %q", len(first["tasks"].([]any)), next)
	}
	second := c.ok(r.url, "tasks/list", map[string]any{"cursor": next})
	if _, more := second["nextCursor"]; more || len(second["tasks"].([]any)) != 10 {
		t.Fatalf("second page: %v", second)
	}
	for _, page := range []map[string]any{first, second} {
		for _, tk := range page["tasks"].([]any) {
			id := tk.(map[string]any)["taskId"].(string)
			if !want[id] {
				t.Fatalf("listed %s, not one of alice's", id)
			}
			delete(want, id)
		}
	}
	if len(want) != 0 {
		t.Fatalf("%d tasks not listed", len(want))
	}
}

// TestIDs: task ids are 160 random bits (crypto/rand), in lowercase
// base32: unique, and of the one shape this package looks up.
func TestIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		id := newID()
		if len(id) != 32 || !validID(id) || seen[id] {
			t.Fatalf("id %q: length %d, valid %v, seen %v", id, len(id), validID(id), seen[id])
		}
		seen[id] = true
	}
	if idEncoding.EncodedLen(idBytes) != 32 || idBytes*8 < 128 {
		t.Fatalf("%d random bits", idBytes*8)
	}
}

// TestTaskTTL: when a task's ttl passes, its call's context ends (the
// call stops; nothing is recorded) and every request answers as for an
// unknown task.
func TestTaskTTL(t *testing.T) {
	g := newGate()
	defer g.release()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, nil)
	c := legacyClient(t, "alice")
	res := c.ok(r.url, "tools/call", map[string]any{"name": "slow", "task": map[string]any{"ttl": 500}})
	id := res["task"].(map[string]any)["taskId"].(string)
	g.waitStarted(t, 1)
	waitFor(t, func() bool { g.mu.Lock(); defer g.mu.Unlock(); return len(g.ctxErrs) == 1 })
	if !errors.Is(g.ctxErrs[0], errEnded) {
		t.Fatalf("the call's context ended with %v, want the task's end", g.ctxErrs[0])
	}
	waitFor(t, func() bool { return r.tasks.Running() == 0 })
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		if code, _, _ := c.fail(r.url, m, map[string]any{"taskId": id}); code != -32602 {
			t.Fatalf("%s of an expired task: %d, want -32602", m, code)
		}
	}
	if l := c.ok(r.url, "tasks/list", nil)["tasks"].([]any); len(l) != 0 {
		t.Fatalf("an expired task is listed: %v", l)
	}
}
