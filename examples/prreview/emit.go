package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// An agent reports what it does as JSON lines on stdout, one per tool call
// and one per event; the dashboard reads them (it never shares memory with
// an agent). The Node reviewer writes the same lines.
//
//	{"ts":"…","agent":"security-3f2a","kind":"security","lang":"go","type":"tool","tool":"workflow_claim",
//	 "args":{…},"result":{…},"ms":2.1}
//	{"ts":"…","agent":"security-3f2a","kind":"security","lang":"go","type":"event","event":"claimed",
//	 "msg":"claimed wf-… (attempt 1, fence 4)","data":{…}}
type line struct {
	TS     string         `json:"ts"`
	Agent  string         `json:"agent"`
	Kind   string         `json:"kind"`
	Lang   string         `json:"lang"`
	Type   string         `json:"type"` // "tool", "event" or "ready"
	Tool   string         `json:"tool,omitempty"`
	Args   any            `json:"args,omitempty"`
	Result any            `json:"result,omitempty"`
	Error  string         `json:"error,omitempty"`
	MS     float64        `json:"ms,omitempty"`
	Event  string         `json:"event,omitempty"`
	Msg    string         `json:"msg,omitempty"`
	Data   map[string]any `json:"data,omitempty"`
}

// An emitter writes an agent's lines.
type emitter struct {
	mu                sync.Mutex
	w                 io.Writer
	agent, kind, lang string
}

func (e *emitter) write(l line) {
	l.TS = time.Now().UTC().Format(time.RFC3339Nano)
	l.Agent, l.Kind, l.Lang = e.agent, e.kind, e.lang
	b, _ := json.Marshal(l)
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// event reports an event with a human message and its data.
func (e *emitter) event(name, msg string, data map[string]any) {
	e.write(line{Type: "event", Event: name, Msg: msg, Data: data})
}

// abbreviate shortens long strings inside a JSON value for the tool log (a
// pull request's diff is stored in the KV store, and is long).
func abbreviate(raw []byte) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	return shorten(v, 0)
}

func shorten(v any, depth int) any {
	switch x := v.(type) {
	case string:
		if r := []rune(x); len(r) > 160 {
			return string(r[:120]) + "… (" + itoa(len(x)) + " bytes)"
		}
	case []any:
		if depth > 3 && len(x) > 0 {
			return "[" + itoa(len(x)) + " items]"
		}
		n := min(len(x), 8)
		out := make([]any, 0, n+1)
		for _, e := range x[:n] {
			out = append(out, shorten(e, depth+1))
		}
		if len(x) > n {
			out = append(out, "… "+itoa(len(x)-n)+" more")
		}
		return out
	case map[string]any:
		if depth > 3 {
			return "{…}"
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = shorten(e, depth+1)
		}
		return out
	}
	return v
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
