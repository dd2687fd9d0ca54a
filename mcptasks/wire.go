package mcptasks

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Keys of params._meta.
const (
	metaVersion      = mcp.MetaKeyProtocolVersion
	metaCapabilities = mcp.MetaKeyClientCapabilities
	metaRelatedTask  = mcp.RelatedTaskMetaKey
)

// JSON-RPC error codes answered here.
const (
	codeInvalidRequest = mcp.INVALID_REQUEST
	codeMethodNotFound = mcp.METHOD_NOT_FOUND
	codeInvalidParams  = mcp.INVALID_PARAMS
	codeInternal       = mcp.INTERNAL_ERROR
	codeHeaderMismatch = mcp.HEADER_MISMATCH
	codeMissingCap     = mcp.MISSING_REQUIRED_CLIENT_CAPABILITY
)

// A request is a JSON-RPC request as received, decoded once: every
// decision about it is made on these fields.
type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// params are the fields of a request's params this package reads.
type params struct {
	Name           string                     `json:"name"`
	Arguments      json.RawMessage            `json:"arguments"`
	Task           *taskParams                `json:"task"`
	TaskID         *string                    `json:"taskId"`
	Cursor         *string                    `json:"cursor"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	Meta           map[string]json.RawMessage `json:"_meta"`
}

// taskParams is the 2025-11-25 params.task.
type taskParams struct {
	TTL json.RawMessage `json:"ttl"`
}

// version is the protocol version the request's _meta declares (a
// 2026-07-28 request always does; an older one never does).
func (p *params) version() string {
	var v string
	_ = json.Unmarshal(p.Meta[metaVersion], &v)
	return v
}

// declared reports whether the request's per-request client capabilities
// name the tasks extension.
func (p *params) declared() bool {
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(p.Meta[metaCapabilities], &caps) != nil {
		return false
	}
	_, ok := caps.Extensions[ExtensionID]
	return ok
}

// stamp writes Unix ms as an ISO 8601 time in UTC, to the millisecond.
func stamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

// legacyTask is a task as 2025-11-25 shows it (Task).
type legacyTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           int64  `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

func (r *record) legacy() legacyTask {
	return legacyTask{TaskID: r.ID, Status: r.Status, StatusMessage: r.Message, CreatedAt: stamp(r.CreatedMs),
		LastUpdatedAt: stamp(r.UpdatedMs), TTL: r.TTLMs, PollInterval: r.PollMs}
}

// modernTask is a task as 2026-07-28 shows it: the flat CreateTaskResult
// (ResultType "task") or a DetailedTask (ResultType "complete", with the
// result, the error or the outstanding input requests inline).
type modernTask struct {
	ResultType     string                     `json:"resultType,omitempty"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          json.RawMessage            `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

func (r *record) modern(resultType string, detailed bool) modernTask {
	m := modernTask{ResultType: resultType, TaskID: r.ID, Status: r.Status, StatusMessage: r.Message,
		CreatedAt: stamp(r.CreatedMs), LastUpdatedAt: stamp(r.UpdatedMs), TTLMs: r.TTLMs, PollIntervalMs: r.PollMs}
	if !detailed {
		return m
	}
	switch r.Status {
	case StatusCompleted:
		m.Result = r.Result
	case StatusFailed:
		m.Error = r.Error
	case StatusInputRequired:
		if r.Input != nil {
			// Every outstanding request: those not answered yet.
			m.InputRequests = map[string]json.RawMessage{}
			for k, v := range r.Input.Requests {
				if _, done := r.Input.Responses[k]; !done {
					m.InputRequests[k] = v
				}
			}
		}
	}
	return m
}

// An answer is a JSON-RPC response to one request, with the HTTP status it
// goes out with.
type answer struct {
	body   []byte
	status int
}

// result answers id with v.
func result(id json.RawMessage, v any) answer {
	b, err := json.Marshal(v)
	if err != nil {
		return failure(id, false, codeInternal, "the answer could not be encoded", nil)
	}
	return answer{body: envelope(id, "result", b), status: http.StatusOK}
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// failure answers id with an error. A 2026-07-28 error goes out with the
// HTTP status that version gives its code (as mcp-go's transport does); an
// older one with 200.
func failure(id json.RawMessage, modern bool, code int, msg string, data any) answer {
	b, _ := json.Marshal(rpcError{Code: code, Message: msg, Data: data})
	return rawFailure(id, modern, code, b)
}

// rawFailure answers id with the error object e.
func rawFailure(id json.RawMessage, modern bool, code int, e json.RawMessage) answer {
	status := http.StatusOK
	if modern {
		switch code {
		case codeMethodNotFound:
			status = http.StatusNotFound
		case codeHeaderMismatch, codeMissingCap, mcp.UNSUPPORTED_PROTOCOL_VERSION, codeInvalidRequest,
			codeInvalidParams, mcp.PARSE_ERROR:
			status = http.StatusBadRequest
		}
	}
	return answer{body: envelope(id, "error", e), status: status}
}

// envelope writes {"jsonrpc":"2.0","id":id,field:v}.
func envelope(id json.RawMessage, field string, v []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	if len(id) == 0 {
		b.WriteString("null")
	} else {
		b.Write(id)
	}
	b.WriteString(`,"` + field + `":`)
	b.Write(v)
	b.WriteByte('}')
	return b.Bytes()
}

// missingCapability is the -32021 error of a client that did not declare
// the extension on a request that needs it.
func missingCapability(id json.RawMessage) answer {
	return failure(id, true, codeMissingCap, "Missing required client capability: "+ExtensionID,
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}})
}

// withRelatedTask returns a result object with _meta[related-task] set to
// task id (2025-11-25 tasks/result).
func withRelatedTask(res json.RawMessage, id string) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	meta[metaRelatedTask], _ = json.Marshal(map[string]string{"taskId": id})
	var err error
	if m["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
