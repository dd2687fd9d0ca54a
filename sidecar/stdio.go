package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
)

// ServeStdio serves MCP over in and out (stdin and stdout) until the input
// ends or ctx is done; then it stops reading and returns once the tool calls
// in flight have answered (or Config.ShutdownTimeout has passed). Only
// JSON-RPC messages are written to out. mcp-go keeps one stdio session per
// process, so ServeStdio may run only once per process.
func (s *Sidecar) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	stdio := server.NewStdioServer(s.mcp)
	stdio.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelError))

	var once sync.Once
	var timer *time.Timer
	drain := func() {
		once.Do(func() {
			s.draining.Store(true)
			timer = time.AfterFunc(s.cfg.ShutdownTimeout, s.hardCancel)
		})
	}
	defer func() {
		once.Do(func() {}) // no timer after this point
		if timer != nil {
			timer.Stop()
		}
	}()

	reading, stopReading := context.WithCancel(context.Background())
	defer stopReading()
	stop := context.AfterFunc(ctx, func() {
		s.log.Info("shutting down: no more input, finishing tool calls in flight",
			"timeout", s.cfg.ShutdownTimeout)
		drain()
		stopReading()
	})
	defer stop()

	if s.tasks != nil {
		// The task front sees each message as the client sent it.
		sio := s.tasks.Stdio(reading, in, out)
		defer func() {
			stopReading() // ends the tasks/result calls still waiting
			sio.Wait()
		}()
		in, out = sio.In, sio.Out
	}
	err := stdio.Listen(reading, &onEOF{r: &preparing{r: bufio.NewReader(in)}, f: drain}, out)
	if errors.Is(err, context.Canceled) && reading.Err() != nil {
		err = nil // we stopped reading ourselves
	}
	return err
}

// detach is a tool middleware for stdio: mcp-go cancels every call when its
// input ends, so a call in flight at shutdown would be cut off. A detached
// call runs until it finishes or the shutdown deadline (hardStop) passes.
func (s *Sidecar) detach(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if isTask(ctx) {
			return next(ctx, req) // not mcp-go's call: its task ends it
		}
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(s.hardStop, cancel)()
		return next(ctx, req)
	}
}

// preparing passes each line (one JSON-RPC message) of its input through
// mcpadapter.PrepareMessage.
type preparing struct {
	r   *bufio.Reader
	buf []byte
	err error
}

func (p *preparing) Read(b []byte) (int, error) {
	for len(p.buf) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		var line []byte
		line, p.err = p.r.ReadBytes('\n')
		if msg := bytes.TrimRight(line, "\r\n"); len(msg) > 0 {
			if out := mcpadapter.PrepareMessage(msg); len(out) != len(msg) || &out[0] != &msg[0] {
				line = append(out, '\n')
			}
		}
		p.buf = line
	}
	n := copy(b, p.buf)
	p.buf = p.buf[n:]
	return n, nil
}

// onEOF calls f once the reader it wraps fails or ends.
type onEOF struct {
	r io.Reader
	f func()
}

func (e *onEOF) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		e.f()
	}
	return n, err
}
