package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/mcptasks"
)

// rawClient sends raw JSON-RPC to a sidecar, as one bearer token, in one
// protocol era (a 2026-07-28 client declares the tasks extension).
type rawClient struct {
	t      *testing.T
	token  string
	modern bool
	id     atomic.Int64
}

func (c *rawClient) send(baseURL, method string, params map[string]any) map[string]any {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if c.modern {
		params["_meta"] = map[string]any{
			mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
			mcp.MetaKeyClientInfo:         map[string]any{"name": "t", "version": "1"},
			mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{mcptasks.ExtensionID: map[string]any{}}},
		}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, baseURL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.modern {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, method)
		if n, ok := params["name"].(string); ok && method == "tools/call" {
			req.Header.Set(mcp.HeaderName, n)
		}
		if id, ok := params["taskId"].(string); ok {
			req.Header.Set(mcp.HeaderName, id)
		}
	} else {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20251125)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	res, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if i := bytes.Index(b, []byte("data: ")); bytes.HasPrefix(b, []byte("event:")) && i >= 0 {
		b = b[i+len("data: "):]
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("%s: HTTP %d %q: %v", method, res.StatusCode, b, err)
	}
	return m
}

func (c *rawClient) result(baseURL, method string, params map[string]any) map[string]any {
	c.t.Helper()
	m := c.send(baseURL, method, params)
	r, ok := m["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s %v: %v", method, params, m)
	}
	return r
}

func (c *rawClient) errorCode(baseURL, method string, params map[string]any) float64 {
	c.t.Helper()
	m := c.send(baseURL, method, params)
	e, ok := m["error"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s %v: no error: %v", method, params, m)
	}
	return e["code"].(float64)
}

// task calls tool as a task (ttl in ms for 2025-11-25) and returns its id.
func (c *rawClient) task(baseURL, tool string, args map[string]any, ttl int) string {
	c.t.Helper()
	p := map[string]any{"name": tool, "arguments": args}
	if !c.modern {
		p["task"] = map[string]any{"ttl": ttl}
	}
	r := c.result(baseURL, "tools/call", p)
	if c.modern {
		if r["resultType"] != "task" {
			c.t.Fatalf("%s did not become a task: %v", tool, r)
		}
		return r["taskId"].(string)
	}
	return r["task"].(map[string]any)["taskId"].(string)
}

// status polls tasks/get until the task is in one of want, and returns it.
func (c *rawClient) status(baseURL, id string, want ...string) map[string]any {
	c.t.Helper()
	var r map[string]any
	eventually(c.t, "task "+id+" in "+strings.Join(want, "/"), func() bool {
		r = c.result(baseURL, "tasks/get", map[string]any{"taskId": id})
		for _, w := range want {
			if r["status"] == w {
				return true
			}
		}
		return false
	})
	return r
}

// tool calls a tool plainly and returns its structured content.
func (c *rawClient) tool(baseURL, name string, args map[string]any) map[string]any {
	c.t.Helper()
	r := c.result(baseURL, "tools/call", map[string]any{"name": name, "arguments": args})
	if r["isError"] == true {
		c.t.Fatalf("%s: %v", name, r)
	}
	return r["structuredContent"].(map[string]any)
}

// TestTaskWaits: workflow_wait and state_wait declare taskSupport optional
// and, called as tasks, complete with what the plain call returns; a task
// without timeout_seconds waits as long as its ttl allows (not the plain
// call's default).
func TestTaskWaits(t *testing.T) {
	r := startHTTP(t, memConfig())
	legacy := &rawClient{t: t}
	tools := legacy.result(r.URL, "tools/list", nil)["tools"].([]any)
	for _, tl := range tools {
		m := tl.(map[string]any)
		ex, _ := m["execution"].(map[string]any)
		want := m["name"] == "workflow_wait" || m["name"] == "state_wait"
		if (ex["taskSupport"] == "optional") != want {
			t.Fatalf("tool %s: execution %v", m["name"], m["execution"])
		}
	}

	// A tool that does not take tasks runs plainly, params.task or not.
	res := legacy.result(r.URL, "tools/call", map[string]any{"name": "state_get", "arguments": map[string]any{"key": "k"},
		"task": map[string]any{"ttl": 1000}})
	if _, isTask := res["task"]; isTask || res["structuredContent"] == nil {
		t.Fatalf("state_get with params.task: %v", res)
	}

	// 2025-11-25: workflow_wait as a task, until a worker finishes the run.
	run := legacy.tool(r.URL, "workflow_create", map[string]any{"name": "long"})
	id := legacy.task(r.URL, "workflow_wait", map[string]any{"run_id": run["run_id"]}, 120_000)
	if got := legacy.result(r.URL, "tasks/get", map[string]any{"taskId": id}); got["status"] != "working" {
		t.Fatalf("tasks/get = %v", got)
	}
	claim := legacy.tool(r.URL, "workflow_claim", map[string]any{"run_id": run["run_id"], "agent_id": "w"})
	legacy.tool(r.URL, "workflow_checkpoint", map[string]any{"run_id": run["run_id"], "step": 1, "output": 1,
		"agent_id": "w", "fence": claim["fence"], "status": "done"})
	res = legacy.result(r.URL, "tasks/result", map[string]any{"taskId": id})
	plain := legacy.result(r.URL, "tools/call", map[string]any{"name": "workflow_wait", "arguments": map[string]any{"run_id": run["run_id"]}})
	delete(res, "_meta")
	if !reflect.DeepEqual(res, plain) {
		t.Fatalf("the task's result %v differs from the plain call's %v", res, plain)
	}
	if sc := res["structuredContent"].(map[string]any); sc["reached"] != true || sc["status"] != "done" {
		t.Fatalf("result %v", sc)
	}

	// 2026-07-28: state_wait as a task (the server decides), until the key
	// is written.
	modern := &rawClient{t: t, modern: true}
	id = modern.task(r.URL, "state_wait", map[string]any{"key": "k"}, 0)
	modern.tool(r.URL, "state_set", map[string]any{"key": "k", "value": "v"})
	got := modern.status(r.URL, id, "completed", "failed")
	sc := got["result"].(map[string]any)["structuredContent"].(map[string]any)
	if got["status"] != "completed" || sc["changed"] != true || sc["value"] != "v" {
		t.Fatalf("state_wait task = %v", got)
	}

	// No timeout_seconds: the task's lifetime bounds the wait. A 3 s task
	// answers changed false well before the plain default of 30 s, and
	// before it expires, so that its result can be read.
	start := time.Now()
	id = legacy.task(r.URL, "state_wait", map[string]any{"key": "never"}, 3000)
	out := legacy.result(r.URL, "tasks/result", map[string]any{"taskId": id})
	if sc := out["structuredContent"].(map[string]any); sc["changed"] != false {
		t.Fatalf("a wait bounded by its task's ttl: %v", out)
	}
	if took := time.Since(start); took > 25*time.Second {
		t.Fatalf("the wait took %v: not bounded by the task's 3 s ttl", took)
	}
	if n := metric(t, r.URL, MetricTasks+`{event="created"}`); n != 3 {
		t.Fatalf("%s created = %v, want 3", MetricTasks, n)
	}
	if n := metric(t, r.URL, MetricTasks+`{event="completed"}`); n != 3 {
		t.Fatalf("%s completed = %v, want 3", MetricTasks, n)
	}
}

// TestTasksAcrossReplicas: two sidecars over one store, on every backend
// two processes can share: a task made on one is polled, listed, waited
// for and cancelled on the other, and only its owner (its bearer token)
// sees it.
func TestTasksAcrossReplicas(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		if !b.Shared && b.Name != "memory" {
			t.Skip("not shared")
		}
		cfg := memConfig()
		cfg.storeURL = b.URL
		cfg.Tokens = []Token{{Secret: "tok-a", Namespace: "team"}, {Secret: "tok-b", Namespace: "team"}, {Secret: "tok-c", Namespace: "other"}}
		ra := startHTTP(t, cfg)
		rb := ra
		if b.Shared {
			rb = startHTTP(t, cfg)
		}
		for _, modern := range []bool{false, true} {
			alice := &rawClient{t: t, token: "tok-a", modern: modern}
			run := alice.tool(ra.URL, "workflow_create", map[string]any{"name": "x"})
			id := alice.task(ra.URL, "workflow_wait", map[string]any{"run_id": run["run_id"]}, 600_000)
			if got := alice.result(rb.URL, "tasks/get", map[string]any{"taskId": id}); got["status"] != "working" {
				t.Fatalf("polled on the other replica: %v", got)
			}
			// Another token, of the same namespace or another: unknown.
			for _, tok := range []string{"tok-b", "tok-c"} {
				other := &rawClient{t: t, token: tok, modern: modern}
				for _, m := range []string{"tasks/get", "tasks/cancel"} {
					if code := other.errorCode(rb.URL, m, map[string]any{"taskId": id}); code != -32602 {
						t.Fatalf("%s by %s: %v, want -32602", m, tok, code)
					}
				}
				if !modern {
					if l := other.result(rb.URL, "tasks/list", nil)["tasks"].([]any); len(l) != 0 {
						t.Fatalf("%s lists %v", tok, l)
					}
				}
			}
			eventually(t, "the task running on the first replica", func() bool { return ra.tasks.Running() == 1 })
			alice.result(rb.URL, "tasks/cancel", map[string]any{"taskId": id})
			// The wait running on the first replica ends through the store.
			eventually(t, "the cancelled call to end", func() bool { return ra.tasks.Running() == 0 })
			if got := alice.status(ra.URL, id, "cancelled"); got["status"] != "cancelled" {
				t.Fatal(got)
			}
			if !modern {
				if l := alice.result(rb.URL, "tasks/list", nil)["tasks"].([]any); len(l) != 1 {
					t.Fatalf("tasks/list = %v", l)
				}
			}
		}
		// tasks/result on one replica waits for a task the other runs.
		alice := &rawClient{t: t, token: "tok-a"}
		id := alice.task(ra.URL, "state_wait", map[string]any{"key": "go"}, 600_000)
		done := make(chan map[string]any, 1)
		go func() { done <- alice.result(rb.URL, "tasks/result", map[string]any{"taskId": id}) }()
		eventually(t, "tasks/result to wait", func() bool { return rb.store.Waiting() >= 1 })
		alice.tool(rb.URL, "state_set", map[string]any{"key": "go", "value": 1})
		if sc := (<-done)["structuredContent"].(map[string]any); sc["changed"] != true {
			t.Fatalf("tasks/result = %v", sc)
		}
	})
}

// TestTaskConfig: a token may not work in the tasks' own namespace, and
// tasks can be turned off.
func TestTaskConfig(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "t", Namespace: mcptasks.DefaultNamespace}}
	if _, err := New(context.Background(), cfg, testLogger(t)); !errors.Is(err, ErrConfig) {
		t.Fatalf("a token in the tasks' namespace: %v, want ErrConfig", err)
	}
	cfg = memConfig()
	cfg.Tasks.Enabled = false
	r := startHTTP(t, cfg)
	c := &rawClient{t: t}
	res := c.result(r.URL, "tools/call", map[string]any{"name": "state_wait",
		"arguments": map[string]any{"key": "k", "timeout_seconds": 0.01}, "task": map[string]any{"ttl": 1000}})
	if _, isTask := res["task"]; isTask {
		t.Fatalf("tasks off, a task was made: %v", res)
	}
}

// TestTasksOverStdio: over stdio a state_wait task is created, polled and
// waited for, and a cancel reaches its call (the stdio detach middleware
// leaves a task's context alone).
func TestTasksOverStdio(t *testing.T) {
	sc := newStdioSidecar(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- sc.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	replies := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil || m["jsonrpc"] != "2.0" {
				t.Errorf("not one JSON-RPC message per line on stdout: %q", sc.Text())
			}
			replies <- m
		}
		close(replies)
	}()
	pending := map[float64]map[string]any{}
	recv := func(id float64) map[string]any {
		t.Helper()
		for {
			if m, ok := pending[id]; ok {
				return m
			}
			select {
			case m, ok := <-replies:
				if !ok {
					t.Fatalf("stdout ended before the answer to %v", id)
				}
				if f, ok := m["id"].(float64); ok {
					pending[f] = m
				}
			case <-time.After(wait):
				t.Fatalf("no answer to %v", id)
			}
		}
	}
	send := func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	recv(1)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	taskID := func(m map[string]any) string {
		t.Helper()
		r, _ := m["result"].(map[string]any)
		task, _ := r["task"].(map[string]any)
		id, _ := task["taskId"].(string)
		if id == "" {
			t.Fatalf("not a task: %v", m)
		}
		return id
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"state_wait","arguments":{"key":"s"},"task":{"ttl":60000}}}`)
	id := taskID(recv(2))
	send(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"s","value":1}}}`)
	recv(4)
	if sc := recv(3)["result"].(map[string]any)["structuredContent"].(map[string]any); sc["changed"] != true {
		t.Fatalf("tasks/result over stdio: %v", sc)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"state_wait","arguments":{"key":"never"},"task":{"ttl":60000}}}`)
	id = taskID(recv(5))
	eventually(t, "the wait to run", func() bool { return sc.tasks.Running() == 1 })
	send(`{"jsonrpc":"2.0","id":6,"method":"tasks/cancel","params":{"taskId":"` + id + `"}}`)
	if st := recv(6)["result"].(map[string]any)["status"]; st != "cancelled" {
		t.Fatalf("tasks/cancel over stdio: %v", st)
	}
	eventually(t, "the cancelled wait to stop", func() bool { return sc.tasks.Running() == 0 })
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return")
	}
}

// TestStdioEndWithWaitingResult: the end of input ends a tasks/result
// still waiting, so that ServeStdio returns.
func TestStdioEndWithWaitingResult(t *testing.T) {
	sc := newStdioSidecar(t)
	inR, inW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- sc.ServeStdio(context.Background(), inR, io.Discard) }()
	send := func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"state_wait","arguments":{"key":"never"},"task":{"ttl":600000}}}`)
	eventually(t, "the task to run", func() bool { return sc.tasks.Running() == 1 })
	tasks, _, err := sc.tasks.List(context.Background(), mcptasks.Owner{Namespace: sc.store.NamespaceName()}, "")
	if err != nil || len(tasks) != 1 {
		t.Fatalf("tasks: %v %v", tasks, err)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + tasks[0].ID + `"}}`)
	eventually(t, "tasks/result to wait", func() bool { return sc.store.Waiting() >= 2 })
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(wait):
		t.Fatal("ServeStdio did not return at the end of input while a tasks/result waited")
	}
}

// TestTaskListen: through the sidecar's front, a 2026-07-28
// subscriptions/listen for a task streams its notifications until the task
// finishes.
func TestTaskListen(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "tok", Namespace: "team"}}
	r := startHTTP(t, cfg)
	c := &rawClient{t: t, token: "tok", modern: true}
	id := c.task(r.URL, "state_wait", map[string]any{"key": "l"}, 0)
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{id}},
		"_meta": map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728, mcp.MetaKeyClientInfo: map[string]any{"name": "t", "version": "1"},
			mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{mcptasks.ExtensionID: map[string]any{}}}}}})
	req, _ := http.NewRequest(http.MethodPost, r.URL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "subscriptions/listen")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var methods []string
	var last map[string]any
	sc := bufio.NewScanner(res.Body)
	wrote := false
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		if meth, ok := m["method"].(string); ok {
			methods = append(methods, meth)
			if meth == "notifications/tasks" {
				last = m["params"].(map[string]any)
				if !wrote {
					wrote = true
					c.tool(r.URL, "state_set", map[string]any{"key": "l", "value": 1})
				}
			}
			continue
		}
		if m["id"] != 7.0 || m["result"] == nil {
			t.Fatalf("the stream's end: %v", m)
		}
	}
	if len(methods) < 2 || methods[0] != "notifications/subscriptions/acknowledged" || last["status"] != "completed" {
		t.Fatalf("stream %v, last %v", methods, last)
	}
}
