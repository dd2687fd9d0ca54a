package mcptasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/storetest"
)

// wait bounds every real wait of these tests: generous, because the
// machine is shared and slow at times; no test depends on being fast.
const wait = 60 * time.Second

// A gate lets a test hold the slow tool's calls and release them.
type gate struct {
	mu       sync.Mutex
	open     chan struct{}
	started  atomic.Int64 // calls that began waiting
	attempts []int64      // Execution.Attempt of each call
	ctxErrs  []error      // why each ended call's context ended, if it did
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

// release lets every call waiting, and every later one, finish.
func (g *gate) release() { close(g.open) }

// waitStarted waits until n calls have started.
func (g *gate) waitStarted(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for g.started.Load() < n {
		if time.Now().After(deadline) {
			g.mu.Lock()
			defer g.mu.Unlock()
			t.Fatalf("%d slow calls started, want %d (attempts %v, ended %v)", g.started.Load(), n, g.attempts, g.ctxErrs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// server is one replica: an mcp-go server with the test tools, its Tasks
// and its HTTP endpoint.
type replica struct {
	srv   *server.MCPServer
	tasks *Tasks
	http  *httptest.Server
	url   string
}

// testTools registers the tools the tests call:
//   - echo returns its arguments as text;
//   - slow waits for g's release (or its context's end), checkpointing
//     "started", and returns "done <attempt>";
//   - boom returns a Go error (a JSON-RPC error of the call);
//   - toolerr returns a tool error result (isError true);
//   - ask asks the client for a name (2026-07-28 input_required) and greets it.
func testTools(s *server.MCPServer, g *gate) {
	ro := []mcp.ToolOption{mcp.WithReadOnlyHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
		mcp.WithIdempotentHintAnnotation(true), mcp.WithOpenWorldHintAnnotation(false)}
	s.AddTools(
		server.ServerTool{Tool: mcp.NewTool("echo", append(ro, mcp.WithString("text"))...),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("echo " + req.GetString("text", "")), nil
			}},
		server.ServerTool{Tool: mcp.NewTool("slow", ro...),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ex, ok := FromContext(ctx)
				if !ok {
					return mcp.NewToolResultText("not a task"), nil
				}
				if err := ex.Checkpoint(ctx, map[string]any{"attempt": ex.Attempt}); err != nil {
					g.mu.Lock()
					g.ctxErrs = append(g.ctxErrs, fmt.Errorf("checkpoint: %w", err))
					g.mu.Unlock()
					return nil, err
				}
				g.mu.Lock()
				g.attempts = append(g.attempts, ex.Attempt)
				g.mu.Unlock()
				g.started.Add(1)
				select {
				case <-g.open:
					return mcp.NewToolResultText(fmt.Sprintf("done %d", ex.Attempt)), nil
				case <-ctx.Done():
					g.mu.Lock()
					g.ctxErrs = append(g.ctxErrs, context.Cause(ctx))
					g.mu.Unlock()
					return nil, ctx.Err()
				}
			}},
		server.ServerTool{Tool: mcp.NewTool("boom", ro...),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, errors.New("boom")
			}},
		server.ServerTool{Tool: mcp.NewTool("toolerr", ro...),
			Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultError("no such thing"), nil
			}},
		server.ServerTool{Tool: mcp.NewTool("ask", ro...),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				resp, ok := req.Params.InputResponses["name"]
				if !ok {
					return server.NewInputRequestBuilder("asked").Elicit("name", mcp.ElicitationParams{
						Message: "Your name?",
						RequestedSchema: map[string]any{"type": "object",
							"properties": map[string]any{"name": map[string]any{"type": "string"}}},
					}).ToolResult(), nil
				}
				var ans struct {
					Action  string         `json:"action"`
					Content map[string]any `json:"content"`
				}
				b, _ := json.Marshal(resp)
				_ = json.Unmarshal(b, &ans)
				return mcp.NewToolResultText(fmt.Sprintf("hello %v (state %s)", ans.Content["name"], req.Params.RequestState)), nil
			}},
		// ask2 asks for "name" twice, in two rounds, under the same key of
		// its own, and greets both answers.
		server.ServerTool{Tool: mcp.NewTool("ask2", ro...),
			Handler: func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				ask := func(state string) *mcp.CallToolResult {
					return server.NewInputRequestBuilder(state).Elicit("name", mcp.ElicitationParams{Message: "Name?",
						RequestedSchema: map[string]any{"type": "object"}}).ToolResult()
				}
				name := func() string {
					var ans struct {
						Content map[string]any `json:"content"`
					}
					b, _ := json.Marshal(req.Params.InputResponses["name"])
					_ = json.Unmarshal(b, &ans)
					return fmt.Sprint(ans.Content["name"])
				}
				switch req.Params.RequestState {
				case "":
					return ask("first:"), nil
				case "first:":
					return ask("second:" + name()), nil
				}
				return mcp.NewToolResultText(strings.TrimPrefix(req.Params.RequestState, "second:") + " and " + name()), nil
			}},
	)
}

// newMCPServer returns a server with the test tools, whose slow tool
// waits for a gate nobody opens.
func newMCPServer() *server.MCPServer {
	s := server.NewMCPServer("tasks-test", "1.0.0", append(ServerOptions(), server.WithRecovery())...)
	testTools(s, newGate())
	return s
}

// newReplica starts a replica over st. Its owner is the X-Owner header
// of a request (principal), in namespace "ns".
func newReplica(t *testing.T, st *state.Store, g *gate, opts *Options) *replica {
	t.Helper()
	s := server.NewMCPServer("tasks-test", "1.0.0", append(ServerOptions(), server.WithRecovery())...)
	testTools(s, g)
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.Owner == nil {
		o.Owner = func(ctx context.Context) (Owner, error) {
			p, _ := ctx.Value(ownerKey{}).(string)
			return Owner{Namespace: "ns", Principal: p}, nil
		}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ts, err := New(st, s, &o)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Enable("slow", "echo", "boom", "toolerr", "ask", "ask2"); err != nil {
		t.Fatal(err)
	}
	h := ts.Handler(server.NewStreamableHTTPServer(s, server.WithStateLess(true), server.WithDisableStreaming(true)))
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, r.Header.Get("X-Owner"))))
	}))
	r := &replica{srv: s, tasks: ts, http: hs, url: hs.URL}
	t.Cleanup(func() { r.stop(t) })
	return r
}

type ownerKey struct{}

// tWriter writes a test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// stop ends the replica as a graceful shutdown does (its tasks given
// back); a second stop does nothing.
func (r *replica) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.tasks.Close(ctx); err != nil {
		t.Error(err)
	}
	r.http.Close()
}

// kill ends the replica as a crash does: its calls stop, nothing is given
// back, its claims stay until they expire.
func (r *replica) kill(t *testing.T) {
	r.tasks.mu.Lock()
	r.tasks.closed = true
	for _, ex := range r.tasks.running {
		if ex.cancel != nil {
			ex.cancel(errKilled)
		}
	}
	r.tasks.mu.Unlock()
	r.tasks.stop()
	r.tasks.wg.Wait()
	r.http.Close()
}

// errKilled stands for a process's death in kill: a call stopped with it
// records nothing and gives nothing back (see execute).
var errKilled = errors.New("test: process killed")

// openStore opens a store on backend b with a short wait poll, so that
// waits across stores (two replicas) are quick on backends that poll.
func openStore(t *testing.T, b storetest.Backend) *state.Store {
	return storetest.Open(t, b.URL, &state.Options{WaitPollInterval: 20 * time.Millisecond, SweepGrace: time.Millisecond})
}

// A client sends raw JSON-RPC over HTTP as a given owner, in one era.
type client struct {
	t      *testing.T
	owner  string
	modern bool
	// declare puts the tasks extension in a modern request's capabilities.
	declare bool
	id      atomic.Int64
}

func legacyClient(t *testing.T, owner string) *client { return &client{t: t, owner: owner} }
func modernClient(t *testing.T, owner string) *client {
	return &client{t: t, owner: owner, modern: true, declare: true}
}

// meta is the _meta of a request of c's era.
func (c *client) meta() map[string]any {
	if !c.modern {
		return nil
	}
	caps := map[string]any{}
	if c.declare {
		caps["extensions"] = map[string]any{ExtensionID: map[string]any{}}
	}
	return map[string]any{
		mcp.MetaKeyProtocolVersion:    mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "test", "version": "1"},
		mcp.MetaKeyClientCapabilities: caps,
	}
}

// send posts method with params to url and returns the HTTP status and the
// decoded JSON-RPC response. nameHeader overrides Mcp-Name ("" derives it).
func (c *client) send(url, method string, params map[string]any, nameHeader string) (int, map[string]any) {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	if m := c.meta(); m != nil {
		params["_meta"] = m
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Owner", c.owner)
	if c.modern {
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, method)
		switch {
		case nameHeader != "":
			req.Header.Set(mcp.HeaderName, nameHeader)
		case method == "tools/call":
			req.Header.Set(mcp.HeaderName, params["name"].(string))
		case strings.HasPrefix(method, "tasks/"):
			if id, ok := params["taskId"].(string); ok {
				req.Header.Set(mcp.HeaderName, id)
			}
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
		c.t.Fatalf("%s: HTTP %d, body %q is not JSON: %v", method, res.StatusCode, b, err)
	}
	return res.StatusCode, m
}

// notify posts a notification (no id, no answer expected).
func (c *client) notify(url, method string, params map[string]any) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Owner", c.owner)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", method, err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
}

// ok sends and returns the result, failing on an error.
func (c *client) ok(url, method string, params map[string]any) map[string]any {
	c.t.Helper()
	_, m := c.send(url, method, params, "")
	r, ok := m["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s %v: no result: %v", method, params, m)
	}
	return r
}

// fail sends and returns the error's code and message, failing on a result.
func (c *client) fail(url, method string, params map[string]any) (int, string, int) {
	c.t.Helper()
	status, m := c.send(url, method, params, "")
	e, ok := m["error"].(map[string]any)
	if !ok {
		c.t.Fatalf("%s %v: no error: %v", method, params, m)
	}
	return int(e["code"].(float64)), e["message"].(string), status
}

// create calls tool as a task and returns the task id.
func (c *client) create(url, tool string, args map[string]any) string {
	c.t.Helper()
	p := map[string]any{"name": tool, "arguments": args}
	if !c.modern {
		p["task"] = map[string]any{"ttl": 600000}
	}
	r := c.ok(url, "tools/call", p)
	if c.modern {
		if r["resultType"] != "task" {
			c.t.Fatalf("tools/call %s: not a task: %v", tool, r)
		}
		return r["taskId"].(string)
	}
	task, ok := r["task"].(map[string]any)
	if !ok {
		c.t.Fatalf("tools/call %s: not a task: %v", tool, r)
	}
	return task["taskId"].(string)
}

// get returns tasks/get's result for id.
func (c *client) get(url, id string) map[string]any {
	c.t.Helper()
	return c.ok(url, "tasks/get", map[string]any{"taskId": id})
}

// until polls tasks/get on url until the task's status is one of want.
func (c *client) until(url, id string, want ...string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		r := c.get(url, id)
		for _, w := range want {
			if r["status"] == w {
				return r
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s is %v, want %v", id, r["status"], want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// listen opens a subscriptions/listen for ids on url and returns the
// messages of its SSE stream, closed when the stream ends.
func (c *client) listen(url string, ids []string) <-chan map[string]any {
	c.t.Helper()
	params := map[string]any{"notifications": map[string]any{"taskIds": ids}, "_meta": c.meta()}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": "subscriptions/listen", "params": params})
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Owner", c.owner)
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, "subscriptions/listen")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		c.t.Fatalf("listen: %s %s", ct, b)
	}
	out := make(chan map[string]any, 16)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					out <- m
				}
			}
		}
	}()
	return out
}
