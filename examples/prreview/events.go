package main

import (
	"encoding/json"
	"sync"
	"time"
)

// A logEntry is one line of the Live Event Stream & Tool Log: an event of
// the dashboard (source "SYSTEM"), or a tool call or event an agent
// reported on its stdout.
type logEntry struct {
	Seq    int64   `json:"seq"`
	TS     string  `json:"ts"`
	Source string  `json:"source"` // "SYSTEM", "DASHBOARD" or an agent id
	Kind   string  `json:"kind,omitempty"`
	Lang   string  `json:"lang,omitempty"`
	Level  string  `json:"level"` // info, event, tool, warn, error
	Event  string  `json:"event,omitempty"`
	Text   string  `json:"text,omitempty"`
	Tool   string  `json:"tool,omitempty"`
	Args   any     `json:"args,omitempty"`
	Result any     `json:"result,omitempty"`
	Error  string  `json:"error,omitempty"`
	MS     float64 `json:"ms,omitempty"`
}

// An sse is one server-sent event.
type sse struct {
	name string
	data []byte
}

// A hub fans events out to the dashboard's browsers and keeps the recent
// log so that a page opened later sees what happened.
type hub struct {
	mu   sync.Mutex
	subs map[chan sse]struct{}
	logs []logEntry
	seq  int64
}

// keepLogs is how many log lines a newly opened page is shown.
const keepLogs = 600

func newHub() *hub { return &hub{subs: map[chan sse]struct{}{}} }

// log records an entry, stamping its sequence number and time if unset,
// and sends it to every browser.
func (h *hub) log(e logEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	e.Seq = h.seq
	if e.TS == "" {
		e.TS = time.Now().UTC().Format(time.RFC3339Nano)
	}
	h.logs = append(h.logs, e)
	if len(h.logs) > keepLogs {
		h.logs = append(h.logs[:0:0], h.logs[len(h.logs)-keepLogs:]...)
	}
	h.sendLocked("log", e)
}

// system logs a line of the dashboard itself.
func (h *hub) system(level, text string) {
	h.log(logEntry{Source: "SYSTEM", Level: level, Text: text})
}

// clearLogs forgets the log (Clear Logs) for pages opened later too.
func (h *hub) clearLogs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.logs = nil
	h.sendLocked("cleared", map[string]any{})
}

// send sends a named event with v as its JSON data to every browser.
func (h *hub) send(name string, v any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sendLocked(name, v)
}

func (h *hub) sendLocked(name string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	for ch := range h.subs {
		select {
		case ch <- sse{name, b}:
		default:
			// A browser that cannot keep up is dropped; EventSource
			// reconnects and gets a fresh snapshot and the log.
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// subscribe returns a channel of events, starting with the kept log, and a
// function that unsubscribes.
func (h *hub) subscribe() (<-chan sse, []logEntry, func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := make(chan sse, 512)
	h.subs[ch] = struct{}{}
	logs := append([]logEntry(nil), h.logs...)
	return ch, logs, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}
