package main

import (
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stdioPeer speaks JSON-RPC to a sidecar binary over its stdin and stdout
// and checks that every stdout line is a JSON-RPC message.
type stdioPeer struct {
	t     *testing.T
	p     *proc
	lines <-chan string
}

func newStdioPeer(t *testing.T, p *proc) *stdioPeer {
	return &stdioPeer{t: t, p: p, lines: readLines(p.stdout)}
}

func (s *stdioPeer) send(msg string) {
	s.t.Helper()
	if _, err := io.WriteString(s.p.stdin, msg+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// check fails the test unless line is a JSON-RPC 2.0 message.
func (s *stdioPeer) check(line string) map[string]any {
	s.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil || m["jsonrpc"] != "2.0" {
		s.t.Fatalf("stdout carries something that is not JSON-RPC: %q", line)
	}
	return m
}

// recv returns the response with id, checking every line up to it.
func (s *stdioPeer) recv(id float64) map[string]any {
	s.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout closed before the response to %v", id)
			}
			if m := s.check(line); m["id"] == id {
				return m
			}
		case <-timeout:
			s.t.Fatalf("no response to %v", id)
		}
	}
}

// drain checks every remaining stdout line until stdout closes.
func (s *stdioPeer) drain() {
	s.t.Helper()
	for line := range s.lines {
		s.check(line)
	}
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-test","version":"1"}}}`

func TestStdioBinary(t *testing.T) {
	p := start(t, []string{"DB_PATH=" + filepath.Join(t.TempDir(), "stdio.db")}, "-transport", "stdio")
	s := newStdioPeer(t, p)

	s.send(initialize)
	init := s.recv(1)
	info, _ := init["result"].(map[string]any)["serverInfo"].(map[string]any)
	if info["name"] != "MCP State Sidecar" {
		t.Errorf("initialize: %v", init)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	tools, _ := s.recv(2)["result"].(map[string]any)["tools"].([]any)
	if len(tools) != 21 {
		t.Fatalf("tools/list over stdio: %d tools, want 21", len(tools))
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"big","value":9007199254740993}}}`)
	s.recv(3)
	s.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"big"}}}`)
	if got, _ := json.Marshal(s.recv(4)); !strings.Contains(string(got), `9007199254740993`) {
		t.Errorf("state_get over stdio lost digits: %s", got)
	}
	s.send(`this is not JSON`)
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"lease_acquire","arguments":{"resource_id":"r","holder_id":"h","ttl_seconds":0}}}`)
	if res, _ := s.recv(5)["result"].(map[string]any); res["isError"] != true {
		t.Errorf("a zero TTL must be a tool error: %v", res)
	}

	if err := p.stdin.Close(); err != nil { // the host goes away
		t.Fatal(err)
	}
	s.drain()
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d after stdin closed, want 0", code)
	}
	if log := p.stderr.String(); !strings.Contains(log, "MCP State Sidecar starting") || !strings.Contains(log, "stopped cleanly") {
		t.Errorf("the logs belong on stderr:\n%s", log)
	}
}

func TestStdioBinarySIGTERM(t *testing.T) {
	p := start(t, []string{"STATE_BACKEND=memory"}, "-transport=stdio")
	s := newStdioPeer(t, p)
	s.send(initialize)
	s.recv(1)
	p.signal(t, syscall.SIGTERM)
	s.drain()
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM in stdio mode, want 0", code)
	}
}
