package mcptasks

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/internal/storetest"
)

// Tests of the 2026-07-28 extension's shapes and rules, over raw JSON-RPC.

func TestModernDiscover(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := modernClient(t, "alice")
	res := c.ok(r.url, "server/discover", nil)
	ext := res["capabilities"].(map[string]any)["extensions"].(map[string]any)
	if v, ok := ext[ExtensionID].(map[string]any); !ok || len(v) != 0 {
		t.Fatalf("extensions = %v, want %s: {}", ext, ExtensionID)
	}
}

func TestModernLifecycle(t *testing.T) {
	g := newGate()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, nil)
	c := modernClient(t, "alice")
	res := c.ok(r.url, "tools/call", map[string]any{"name": "slow"})
	want := []string{"createdAt", "lastUpdatedAt", "pollIntervalMs", "resultType", "status", "taskId", "ttlMs"}
	for _, f := range want {
		if _, ok := res[f]; !ok {
			t.Fatalf("CreateTaskResult lacks %s: %v", f, res)
		}
	}
	if res["resultType"] != "task" || res["status"] != "working" || res["ttlMs"] != float64(DefaultTTL.Milliseconds()) {
		t.Fatalf("CreateTaskResult = %v", res)
	}
	id := res["taskId"].(string)
	g.waitStarted(t, 1)
	got := c.get(r.url, id)
	if got["resultType"] != "complete" || got["status"] != "working" || got["result"] != nil {
		t.Fatalf("tasks/get of a working task = %v", got)
	}
	g.release()
	got = c.until(r.url, id, "completed")
	if got["resultType"] != "complete" {
		t.Fatalf("tasks/get resultType = %v", got["resultType"])
	}
	result := got["result"].(map[string]any)
	if text := result["content"].([]any)[0].(map[string]any)["text"]; text != "done 1" || result["resultType"] != "complete" {
		t.Fatalf("the result inline = %v", result)
	}
	// tasks/update and tasks/cancel acknowledge with an empty result, even
	// for a finished task; the task keeps its status.
	for _, m := range []string{"tasks/update", "tasks/cancel"} {
		ack := c.ok(r.url, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}})
		if !reflect.DeepEqual(ack, map[string]any{"resultType": "complete"}) {
			t.Fatalf("%s ack = %v", m, ack)
		}
	}
	if got := c.get(r.url, id); got["status"] != "completed" {
		t.Fatalf("cancelling a completed task changed it: %v", got)
	}
	// tasks/list and tasks/result do not exist in this era.
	for _, m := range []string{"tasks/list", "tasks/result"} {
		code, _, status := c.fail(r.url, m, map[string]any{"taskId": id})
		if code != -32601 || status != http.StatusNotFound {
			t.Fatalf("%s: %d (HTTP %d), want -32601 (404)", m, code, status)
		}
	}
}

func TestModernResultsExact(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := modernClient(t, "alice")
	plainClient := &client{t: t, owner: "alice", modern: true} // does not declare the extension
	for _, tool := range []string{"echo", "toolerr"} {
		plain := plainClient.ok(r.url, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{"text": "x"}})
		if plain["resultType"] != "complete" {
			t.Fatalf("a client that did not declare the extension must get the plain result: %v", plain)
		}
		id := c.create(r.url, tool, map[string]any{"text": "x"})
		got := c.until(r.url, id, "completed", "failed")
		if got["status"] != "completed" || !reflect.DeepEqual(got["result"], plain) {
			t.Fatalf("%s: task %v, plain call %v", tool, got, plain)
		}
	}
	_, plain := plainClient.send(r.url, "tools/call", map[string]any{"name": "boom"}, "")
	id := c.create(r.url, "boom", nil)
	got := c.until(r.url, id, "completed", "failed")
	if got["status"] != "failed" || !reflect.DeepEqual(got["error"], plain["error"]) || got["result"] != nil {
		t.Fatalf("failed task %v; the plain call's error %v", got, plain["error"])
	}
	if !strings.Contains(got["statusMessage"].(string), "boom") {
		t.Fatalf("statusMessage %v", got["statusMessage"])
	}
}

func TestModernErrors(t *testing.T) {
	g := newGate()
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), g, nil)
	c := modernClient(t, "alice")
	id := c.create(r.url, "slow", nil)
	g.waitStarted(t, 1)
	defer g.release()

	// A client that did not declare the extension: -32021, naming it.
	plain := &client{t: t, owner: "alice", modern: true}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		status, res := plain.send(r.url, m, map[string]any{"taskId": id}, "")
		e := res["error"].(map[string]any)
		data, _ := e["data"].(map[string]any)
		if e["code"] != float64(-32021) || status != http.StatusBadRequest || data["requiredCapabilities"] == nil {
			t.Fatalf("%s without the extension: HTTP %d %v", m, status, res)
		}
	}
	// Unknown, malformed and foreign ids: -32602, the same for all.
	bob := modernClient(t, "bob")
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		for _, cc := range []struct {
			c  *client
			id string
		}{{c, newID()}, {c, "nope"}, {bob, id}} {
			code, msg, status := cc.c.fail(r.url, m, map[string]any{"taskId": cc.id, "inputResponses": map[string]any{}})
			if code != -32602 || status != http.StatusBadRequest || !strings.Contains(msg, "not found") {
				t.Fatalf("%s %s as %s: %d %q (HTTP %d)", m, cc.id, cc.c.owner, code, msg, status)
			}
		}
	}
	// Bob's cancel changed nothing.
	if got := c.get(r.url, id); got["status"] != "working" {
		t.Fatalf("a foreign cancel changed the task: %v", got)
	}
	// A request whose header says 2026-07-28 must say it in _meta too.
	status, res := sendWithVersionHeader(t, r.url, `{"jsonrpc":"2.0","id":9,"method":"tasks/get","params":{"taskId":"`+id+`"}}`)
	if e, _ := res["error"].(map[string]any); e["code"] != float64(-32602) || status != http.StatusBadRequest {
		t.Fatalf("a 2026-07-28 header without _meta: HTTP %d %v", status, res)
	}
	// Mcp-Name must name the task.
	for _, name := range []string{"slow", newID()} {
		status, res := c.send(r.url, "tasks/get", map[string]any{"taskId": id}, name)
		if e, _ := res["error"].(map[string]any); e["code"] != float64(mcp.HEADER_MISMATCH) || status != http.StatusBadRequest {
			t.Fatalf("Mcp-Name %q for task %s: HTTP %d %v", name, id, status, res)
		}
	}
}

// TestModernInput: a call that asks for input puts the task in
// input_required with every outstanding request, under keys never used
// twice; tasks/update answers it (unknown keys ignored), and the call goes
// on with the answers.
func TestModernInput(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := modernClient(t, "alice")
	id := c.create(r.url, "ask", nil)
	got := c.until(r.url, id, "input_required")
	reqs := got["inputRequests"].(map[string]any)
	if len(reqs) != 1 || reqs["r1.name"] == nil {
		t.Fatalf("inputRequests = %v", reqs)
	}
	if m := reqs["r1.name"].(map[string]any); m["method"] != "elicitation/create" {
		t.Fatalf("the request = %v", m)
	}
	ack := c.ok(r.url, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"name": map[string]any{"action": "accept"}}})
	if ack["resultType"] != "complete" {
		t.Fatalf("ack %v", ack)
	}
	if got := c.get(r.url, id); got["status"] != "input_required" {
		t.Fatalf("an answer to an unknown key changed the task: %v", got)
	}
	c.ok(r.url, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"r1.name": map[string]any{"action": "accept", "content": map[string]any{"name": "Luca"}}}})
	got = c.until(r.url, id, "completed", "failed")
	text := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]
	if text != "hello Luca (state asked)" {
		t.Fatalf("result %v", got)
	}
}

// TestModernInputRounds: a call that asks twice under the same key of its
// own gets two distinct keys, one per round: no key names two requests.
func TestModernInputRounds(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	c := modernClient(t, "alice")
	id := c.create(r.url, "ask2", nil)
	answer := func(key, name string) {
		got := c.until(r.url, id, "input_required")
		reqs := got["inputRequests"].(map[string]any)
		if len(reqs) != 1 || reqs[key] == nil {
			t.Fatalf("inputRequests = %v, want only %s", reqs, key)
		}
		c.ok(r.url, "tasks/update", map[string]any{"taskId": id,
			"inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"name": name}}}})
	}
	answer("r1.name", "Ada")
	// The first round's key, answered again, is ignored.
	c.ok(r.url, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"r1.name": map[string]any{"action": "accept", "content": map[string]any{"name": "Eve"}}}})
	answer("r2.name", "Grace")
	got := c.until(r.url, id, "completed", "failed")
	if text := got["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"]; text != "Ada and Grace" {
		t.Fatalf("result %v", got)
	}
}

// TestModernListen: a subscriptions/listen asking for task notifications
// from a client that did not declare the extension gets -32021.
func TestModernListen(t *testing.T) {
	r := newReplica(t, openStore(t, storetest.New(t, "memory")), newGate(), nil)
	plain := &client{t: t, owner: "alice", modern: true}
	status, res := plain.send(r.url, "subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{newID()}}}, "")
	if e, _ := res["error"].(map[string]any); e["code"] != float64(-32021) || status != http.StatusBadRequest {
		t.Fatalf("listen for task ids without the extension: HTTP %d %v", status, res)
	}
}

// sendWithVersionHeader posts body with the 2026-07-28 headers but
// whatever _meta body has.
func sendWithVersionHeader(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Owner", "alice")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "tasks/get")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, m
}

// TestModernListenTasks: a subscriptions/listen for task ids, on another
// replica than the one running the task, acknowledges the caller's own
// tasks only, sends the task as tasks/get shows it now and at each change,
// and ends once the task is finished.
func TestModernListenTasks(t *testing.T) {
	g := newGate()
	st := openStore(t, storetest.New(t, "memory"))
	a := newReplica(t, st, g, nil)
	b := newReplica(t, st, g, &Options{SweepInterval: -1})
	c := modernClient(t, "alice")
	id := c.create(a.url, "slow", nil)
	g.waitStarted(t, 1)
	bob := modernClient(t, "bob")
	bobID := bob.create(a.url, "echo", nil)

	events := c.listen(b.url, []string{id, bobID, newID(), id})
	ack := <-events
	if ack["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first message %v", ack)
	}
	p := ack["params"].(map[string]any)
	if ids := p["notifications"].(map[string]any)["taskIds"].([]any); len(ids) != 1 || ids[0] != id {
		t.Fatalf("agreed to %v, want only the caller's own task", ids)
	}
	if p["_meta"].(map[string]any)[mcp.MetaKeySubscriptionID] == nil {
		t.Fatalf("the acknowledgement has no subscription id: %v", p)
	}
	now := <-events
	if now["method"] != "notifications/tasks" || now["params"].(map[string]any)["status"] != "working" {
		t.Fatalf("the task now: %v", now)
	}
	g.release()
	var last map[string]any
	for m := range events {
		if m["method"] == "notifications/tasks" {
			last = m["params"].(map[string]any)
			continue
		}
		if r, _ := m["result"].(map[string]any); r == nil || r["_meta"].(map[string]any)[mcp.MetaKeySubscriptionID] == nil {
			t.Fatalf("the stream's end: %v", m)
		}
	}
	if last["status"] != "completed" || last["taskId"] != id || last["result"] == nil {
		t.Fatalf("the last notification: %v", last)
	}
	if _, ok := last["resultType"]; ok {
		t.Fatalf("a notification carries resultType: %v", last)
	}
	got := c.get(a.url, id)
	delete(got, "resultType")
	delete(last, "_meta")
	if !reflect.DeepEqual(got, last) {
		t.Fatalf("the notification %v is not what tasks/get says %v", last, got)
	}
}
