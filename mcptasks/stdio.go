package mcptasks

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// A Stdio is the stdio transport's input and output with the task front
// in between: give In and Out to server.NewStdioServer(srv).Listen. In
// yields every line (one JSON-RPC message) of the input that is not this
// package's to answer; the others are answered on Out, each in a goroutine
// of its own (a tasks/result may wait long), as whole lines that never
// interleave with the server's.
type Stdio struct {
	// In is the input for the server.
	In io.Reader
	// Out is the output for the server: it writes whole lines to the
	// underlying writer, one at a time.
	Out io.Writer

	wg sync.WaitGroup
}

// Stdio wraps in and out, the transport's input and output. Requests are
// answered with ctx (whose values Options.Owner reads); once it ends,
// waiting tasks/result calls give up. Call Wait after the server's Listen
// returned, before closing out.
func (t *Tasks) Stdio(ctx context.Context, in io.Reader, out io.Writer) *Stdio {
	lo := &lockedOut{w: out}
	pr, pw := io.Pipe()
	s := &Stdio{In: pr, Out: &lineWriter{out: lo}}
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, err := br.ReadBytes('\n')
			if msg := bytes.TrimSpace(line); len(msg) > 0 {
				if !s.serve(ctx, t, msg, lo) {
					if _, werr := pw.Write(line); werr != nil {
						return // the server stopped reading
					}
				}
			}
			if err != nil {
				_ = pw.CloseWithError(err)
				return
			}
		}
	}()
	return s
}

// serve answers msg on w if it is the front's, in a goroutine.
func (s *Stdio) serve(ctx context.Context, t *Tasks, msg []byte, w *lockedOut) bool {
	req := &request{}
	if !mayHandle(msg, req) {
		return false
	}
	// tools/call and subscriptions/listen are decided here, so that one the
	// front leaves to the server goes to it in input order. (A task's
	// creation answers at once; a listen the front serves streams in a
	// goroutine.)
	if req.Method == "subscriptions/listen" {
		refuse, _, ok := planListen(req, nil)
		if !ok {
			return false
		}
		if refuse != nil {
			w.line(refuse.body)
			return true
		}
	}
	if req.Method == "tools/call" {
		reply, _, ok := t.HandleMessage(ctx, msg, nil)
		if ok {
			w.line(reply)
		}
		return ok
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if reply, _, ok := t.HandleStream(ctx, msg, nil, w.line); ok {
			w.line(reply)
		}
	}()
	return true
}

// mayHandle reports whether msg is a request for a method the front may
// answer, decoding it into req.
func mayHandle(msg []byte, req *request) bool {
	if msg[0] != '{' || !bytes.Contains(msg, []byte(`"`)) {
		return false
	}
	if err := json.Unmarshal(msg, req); err != nil || len(req.ID) == 0 {
		return false
	}
	switch req.Method {
	case "tools/call", "subscriptions/listen", "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		return true
	}
	return false
}

// Wait waits for the answers still being written.
func (s *Stdio) Wait() { s.wg.Wait() }

// lockedOut is the transport's output, written one whole line at a time.
type lockedOut struct {
	mu sync.Mutex
	w  io.Writer
}

// line writes b and a newline in one Write.
func (o *lockedOut) line(b []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, _ = o.w.Write(append(b, '\n'))
}

// A lineWriter is the server's side of a lockedOut: what it is given is
// written when a newline ends it, whole lines in one Write, so that the
// server's lines and the front's never mix.
type lineWriter struct {
	out *lockedOut
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	l.buf = append(l.buf, p...)
	i := bytes.LastIndexByte(l.buf, '\n')
	if i < 0 {
		return len(p), nil
	}
	_, err := l.out.w.Write(l.buf[:i+1])
	l.buf = append(l.buf[:0], l.buf[i+1:]...)
	return len(p), err
}
