package mcptasks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
)

// listPage is the number of tasks a 2025-11-25 tasks/list page holds.
const listPage = 50

// HandleMessage answers msg, one JSON-RPC message as a transport received
// it, when it is this package's to answer: a task-augmented tools/call of an
// enabled tool (a 2025-11-25 call with params.task, a 2026-07-28 call from a
// client that declared the extension) and the tasks/ methods. reply is the
// JSON-RPC response and status the HTTP status to send it with. For any
// other message ok is false and the caller passes msg to the server.
//
// header is the HTTP request's header, checked as 2026-07-28 requires
// (Mcp-Method, and Mcp-Name equal to params.taskId on tasks/ requests); nil
// for a transport without headers (stdio). ctx is the request's: Options.Owner
// reads the caller from it, and a task's call runs with its values (not its
// cancellation).
//
// HandleMessage cannot stream: a subscriptions/listen for task
// notifications is left to the server (which agrees to no task ids). Use
// HandleStream, or Serve over HTTP, to answer it.
func (t *Tasks) HandleMessage(ctx context.Context, msg []byte, header http.Header) (reply []byte, status int, ok bool) {
	return t.HandleStream(ctx, msg, header, nil)
}

// HandleStream is HandleMessage for a transport that can send messages
// before the reply: a subscriptions/listen that asks a declaring client's
// task notifications (and nothing else) is answered here, emit sending the
// acknowledgement and each notifications/tasks on the request's stream,
// until every task followed is finished or ctx ends; then reply ends the
// stream. emit is called from the calling goroutine only.
func (t *Tasks) HandleStream(ctx context.Context, msg []byte, header http.Header, emit func(msg []byte)) (reply []byte, status int, ok bool) {
	msg = bytes.TrimSpace(msg)
	if len(msg) == 0 || msg[0] != '{' {
		return nil, 0, false // batches and garbage are the server's
	}
	if !mayBeOurs(msg) {
		return nil, 0, false // a plain call, or another method: the server's
	}
	var req request
	if json.Unmarshal(msg, &req) != nil || len(req.ID) == 0 || bytes.Equal(req.ID, []byte("null")) {
		return nil, 0, false
	}
	var a answer
	switch req.Method {
	case "tools/call":
		a, ok = t.call(ctx, &req, header)
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		a, ok = t.tasks(ctx, &req, header), true
	case "subscriptions/listen":
		var refuse *answer
		var ids []string
		switch refuse, ids, ok = planListen(&req, header); {
		case !ok:
		case refuse != nil:
			a = *refuse
		case emit == nil:
			ok = false
		default:
			a = t.listen(ctx, &req, ids, emit)
		}
	}
	if !ok {
		return nil, 0, false
	}
	return a.body, a.status, true
}

// mayBeOurs reports whether msg may be a message HandleStream answers,
// without decoding it: a tasks/ method or subscriptions/listen (whose
// names appear as they are in the method's value), or a tools/call asking
// for a task (params.task, whose key encoding/json matches in any case) or
// declaring the extension (ExtensionID, a key of a map, matched exactly).
// A message with a backslash (an escape may spell any of them) or a byte
// outside ASCII (encoding/json folds "ſ" to "s" and the Kelvin sign to
// "k" when it matches keys) is decoded whatever it holds. So false means
// that decoding it would find nothing of this package's, and most tool
// calls, which ask for no task, reach the server without a decode here.
func mayBeOurs(msg []byte) bool {
	for _, c := range msg {
		if c == '\\' || c >= 0x80 {
			return true
		}
	}
	return bytes.Contains(msg, []byte("tasks/")) || bytes.Contains(msg, []byte("subscriptions/listen")) ||
		bytes.Contains(msg, []byte(ExtensionID)) || containsFoldASCII(msg, `"task"`)
}

// containsFoldASCII reports whether s holds sub, which starts with a
// byte that is not a letter, ASCII letters matched in any case.
func containsFoldASCII(s []byte, sub string) bool {
	for i := bytes.IndexByte(s, sub[0]); i >= 0 && i+len(sub) <= len(s); {
		if bytes.EqualFold(s[i:i+len(sub)], []byte(sub)) {
			return true
		}
		j := bytes.IndexByte(s[i+1:], sub[0])
		if j < 0 {
			return false
		}
		i += 1 + j
	}
	return false
}

// call makes a task of a tools/call that asks for one (2025-11-25) or may
// get one (2026-07-28); ok is false for a call that runs as a plain call.
func (t *Tasks) call(ctx context.Context, req *request, header http.Header) (answer, bool) {
	var p params
	if json.Unmarshal(req.Params, &p) != nil || !t.enabled(p.Name) {
		return answer{}, false
	}
	version := p.version()
	modern := mcp.IsModernProtocol(version)
	if !modern && headerModern(header) {
		return answer{}, false // mcp-go refuses it, in its own words
	}
	var ttl time.Duration
	if modern {
		if !p.declared() || !modernHeaders(header, version, "tools/call", req.Params, nil) || !t.paramHeaders(header, p.Name, req.Params) {
			// A plain call; or one whose headers the server refuses, in
			// its own words.
			return answer{}, false
		}
		if t.o.Decide != nil && !t.o.Decide(ctx, p.Name, p.Arguments) {
			return answer{}, false
		}
	} else {
		if p.Task == nil {
			return answer{}, false
		}
		var err error
		if ttl, err = requestedTTL(p.Task.TTL); err != nil {
			return failure(req.ID, false, codeInvalidParams, err.Error(), nil), true
		}
	}
	owner, err := t.o.Owner(ctx)
	if err != nil {
		return failure(req.ID, modern, codeInvalidRequest, "Cannot create task: "+err.Error(), nil), true
	}
	rec, err := t.create(ctx, owner, version, p.Name, req.Params, t.ttlFor(ttl))
	switch {
	case errors.Is(err, errTooMany):
		return failure(req.ID, modern, codeInvalidRequest,
			fmt.Sprintf("Cannot create task: too many live tasks: at most %d may be working at once for one caller; wait for one to finish or cancel one", t.o.MaxLive),
			map[string]any{"maxLiveTasks": t.o.MaxLive}), true
	case err != nil:
		t.log.Error("mcptasks: creating a task failed", "tool", p.Name, "err", err)
		return failure(req.ID, modern, codeInternal, "Cannot create task: the task store failed", nil), true
	}
	t.observe(EventCreated)
	t.start(context.WithoutCancel(ctx), rec)
	if modern {
		return result(req.ID, rec.modern("task", false)), true
	}
	return result(req.ID, map[string]any{"task": rec.legacy()}), true
}

// requestedTTL reads params.task.ttl: absent or null is no wish, anything
// else must be a positive integer number of milliseconds.
func requestedTTL(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < 1 {
		return 0, fmt.Errorf("params.task.ttl must be a positive integer number of milliseconds, got %s", raw)
	}
	return time.Duration(min(f, float64(math.MaxInt64/int64(time.Millisecond)))) * time.Millisecond, nil
}

// modernHeaders checks the HTTP headers of a 2026-07-28 request as mcp-go's
// transport does: the protocol version in the header and in _meta agree,
// Mcp-Method names the method and, for tools/call, Mcp-Name the tool (and
// the parameters mirrored in headers match); name, when not nil, is what
// Mcp-Name must say instead (a task id). No header at all (stdio) passes.
func modernHeaders(header http.Header, version, method string, rawParams json.RawMessage, name *string) bool {
	if header == nil {
		return true
	}
	if header.Get(mcp.HeaderProtocolVersion) != version || header.Get(mcp.HeaderLastEventID) != "" {
		return false
	}
	if name == nil {
		return mcp.ValidateStandardHeaders(header.Get, version, mcp.MCPMethod(method), rawParams) == nil
	}
	if header.Get(mcp.HeaderMethod) != method {
		return false
	}
	v, ok := mcp.DecodeHeaderValue(header.Get(mcp.HeaderName))
	return ok && v != "" && v == *name
}

// paramHeaders checks the headers that mirror the tool's parameters
// (x-mcp-header), as mcp-go does for a call it runs.
func (t *Tasks) paramHeaders(header http.Header, tool string, rawParams json.RawMessage) bool {
	st := t.srv.GetTool(tool)
	if header == nil || st == nil {
		return true
	}
	lookup := func(name string) (string, bool) {
		vs := header.Values(name)
		if len(vs) == 0 {
			return "", false
		}
		return vs[0], true
	}
	return mcp.ValidateParamHeadersLookup(lookup, &st.Tool, rawParams) == nil
}

// headerModern reports whether an HTTP request's Mcp-Protocol-Version
// names 2026-07-28 or later: such a request must say so in its _meta too.
func headerModern(header http.Header) bool {
	return header != nil && mcp.IsModernProtocol(header.Get(mcp.HeaderProtocolVersion))
}

// tasks answers the tasks/ methods.
func (t *Tasks) tasks(ctx context.Context, req *request, header http.Header) answer {
	var p params
	if len(req.Params) > 0 && json.Unmarshal(req.Params, &p) != nil {
		return failure(req.ID, false, codeInvalidParams, "params must be an object", nil)
	}
	version := p.version()
	modern := mcp.IsModernProtocol(version)
	if !modern && headerModern(header) {
		// As mcp-go answers a request whose header names 2026-07-28 and
		// whose _meta does not.
		return failure(req.ID, true, codeInvalidParams, "missing or invalid _meta field "+metaVersion, nil)
	}
	if modern {
		switch {
		case req.Method == "tasks/result" || req.Method == "tasks/list":
			return failure(req.ID, true, codeMethodNotFound,
				fmt.Sprintf("Method %s not found: it was removed in protocol version %s", req.Method, mcp.ProtocolVersion20260728), nil)
		case !p.declared():
			return missingCapability(req.ID)
		case p.TaskID == nil:
			return failure(req.ID, true, codeInvalidParams, "params.taskId must be a string", nil)
		case !modernHeaders(header, version, req.Method, req.Params, p.TaskID):
			return failure(req.ID, true, codeHeaderMismatch, fmt.Sprintf(
				"the %s and %s headers must name the method and the task (params.taskId), and %s must equal _meta's protocol version",
				mcp.HeaderMethod, mcp.HeaderName, mcp.HeaderProtocolVersion), nil)
		}
	} else if req.Method == "tasks/update" {
		return failure(req.ID, false, codeMethodNotFound, "Method tasks/update not found: it is part of protocol version "+mcp.ProtocolVersion20260728, nil)
	}
	if req.Method != "tasks/list" && p.TaskID == nil {
		return failure(req.ID, modern, codeInvalidParams, "params.taskId must be a string", nil)
	}
	owner, err := t.o.Owner(ctx)
	if err != nil {
		return failure(req.ID, modern, codeInvalidRequest, err.Error(), nil)
	}
	switch req.Method {
	case "tasks/get":
		rec, _, err := t.get(ctx, owner, *p.TaskID)
		if err != nil {
			return t.storeFailure(req.ID, modern, "Failed to retrieve task", err)
		}
		if modern {
			return result(req.ID, rec.modern("complete", true))
		}
		return result(req.ID, rec.legacy())
	case "tasks/update":
		if err := t.answer(ctx, owner, *p.TaskID, p.InputResponses); err != nil {
			return t.storeFailure(req.ID, true, "Failed to update task", err)
		}
		return result(req.ID, map[string]string{"resultType": "complete"})
	case "tasks/cancel":
		rec, err := t.cancel(ctx, owner, *p.TaskID)
		var te *terminalError
		switch {
		case errors.As(err, &te) && modern:
			// Cancelling is eventually consistent: a task that finished
			// first keeps its status.
			return result(req.ID, map[string]string{"resultType": "complete"})
		case errors.As(err, &te):
			return failure(req.ID, false, codeInvalidParams, te.Error(), nil)
		case err != nil:
			return t.storeFailure(req.ID, modern, "Failed to cancel task", err)
		}
		t.observe(EventCancelled)
		if modern {
			return result(req.ID, map[string]string{"resultType": "complete"})
		}
		return result(req.ID, rec.legacy())
	case "tasks/result":
		return t.result(ctx, req.ID, owner, *p.TaskID)
	default: // tasks/list
		cursor := ""
		if p.Cursor != nil {
			cursor = *p.Cursor
		}
		recs, next, err := t.list(ctx, owner, cursor, listPage)
		if errors.Is(err, state.ErrInvalid) {
			return failure(req.ID, false, codeInvalidParams, "Invalid cursor", nil)
		}
		if err != nil {
			return t.storeFailure(req.ID, false, "Failed to list tasks", err)
		}
		tasks := make([]legacyTask, len(recs))
		for i, r := range recs {
			tasks[i] = r.legacy()
		}
		out := map[string]any{"tasks": tasks}
		if next != "" {
			out["nextCursor"] = next
		}
		return result(req.ID, out)
	}
}

// result answers 2025-11-25 tasks/result: once the task is terminal (it
// waits for that with the store's WaitKey, from any replica, without
// polling), exactly what its call returned: the result, with the task named
// in its _meta, or the JSON-RPC error.
func (t *Tasks) result(ctx context.Context, id json.RawMessage, owner Owner, taskID string) answer {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)() // Close ends the wait
	for {
		rec, version, err := t.get(ctx, owner, taskID)
		if err != nil {
			return t.storeFailure(id, false, "Failed to retrieve task result", err)
		}
		switch rec.Status {
		case StatusCompleted:
			res, err := withRelatedTask(rec.Result, rec.ID)
			if err != nil {
				return failure(id, false, codeInternal, "the stored result is not an object", nil)
			}
			return answer{body: envelope(id, "result", res), status: http.StatusOK}
		case StatusFailed:
			var e rpcError
			_ = json.Unmarshal(rec.Error, &e)
			return rawFailure(id, false, e.Code, rec.Error)
		case StatusCancelled:
			return failure(id, false, codeInvalidParams, "Task "+rec.ID+" was cancelled: it has no result", nil)
		}
		if _, err := t.st.WaitKey(ctx, taskKey(taskID), version); err != nil && !errors.Is(err, state.ErrNotFound) {
			if t.ctx.Err() != nil {
				return failure(id, false, codeInternal, "The server is shutting down: ask again for the task's result", nil)
			}
			return failure(id, false, codeInternal, "Stopped waiting for the task's result", nil)
		}
	}
}

// storeFailure answers a failed task store call: -32602 for a task that is
// not the caller's (unknown, expired or someone else's: the same words for
// all three); -32603 otherwise, with the details logged only.
func (t *Tasks) storeFailure(id json.RawMessage, modern bool, what string, err error) answer {
	if errors.Is(err, errNoTask) {
		return failure(id, modern, codeInvalidParams, what+": Task not found or expired", nil)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return failure(id, modern, codeInternal, what+": the request ended first", nil)
	}
	t.log.Error("mcptasks: "+what, "err", err)
	return failure(id, modern, codeInternal, what+": the task store failed", nil)
}
