package main

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// An event is one line a worker or aggregator prints on stdout, as JSON;
// the orchestrator turns them into its transcript.
type event struct {
	Who      string           `json:"who"`
	Ev       string           `json:"ev"` // claimed, lost, resumed, step, stalled, done, fenced, waiting, refused, report, exit...
	Msg      string           `json:"msg"`
	Run      string           `json:"run,omitempty"`
	Item     string           `json:"item,omitempty"`
	Step     int64            `json:"step,omitempty"`
	Attempt  int64            `json:"attempt,omitempty"`
	Fence    int64            `json:"fence,omitempty"`
	Children map[string]int64 `json:"children,omitempty"`
	Report   *report          `json:"report,omitempty"`

	At  time.Time `json:"-"` // when the orchestrator read it
	PID int       `json:"-"`
}

// An emitter prints the events of one process.
type emitter struct {
	mu  sync.Mutex
	w   io.Writer
	who string
}

func (e *emitter) emit(ev event) {
	ev.Who = e.who
	b, _ := json.Marshal(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}
