package mcptasks

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/internal/storetest"
)

// TestStdio runs the task front around mcp-go's stdio transport: task
// messages are answered by the front, everything else by the server, and
// every line of the output is one whole JSON-RPC message.
func TestStdio(t *testing.T) {
	g := newGate()
	st := openStore(t, storetest.New(t, "memory"))
	s := newMCPServer()
	testTools(s, g)
	ts, err := New(st, s, &Options{Owner: func(context.Context) (Owner, error) { return Owner{Namespace: "ns"}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close(context.Background())
	if err := ts.Enable("slow", "echo"); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sio := ts.Stdio(ctx, inR, outW)
	listened := make(chan error, 1)
	go func() { listened <- server.NewStdioServer(s).Listen(ctx, sio.In, sio.Out) }()

	replies := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("output line %q is not one JSON message: %v", sc.Text(), err)
			}
			replies <- m
		}
	}()
	send := func(s string) { _, _ = io.WriteString(inW, s+"\n") }
	recv := func(id float64) map[string]any {
		t.Helper()
		timeout := time.After(wait)
		for {
			select {
			case m := <-replies:
				if m["id"] == id {
					return m
				}
				replies <- m // someone else's: keep it
				time.Sleep(time.Millisecond)
			case <-timeout:
				t.Fatalf("no reply to %v", id)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if m := recv(1); m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow","arguments":{},"task":{"ttl":60000}}}`)
	created := recv(2)
	id := created["result"].(map[string]any)["task"].(map[string]any)["taskId"].(string)
	g.waitStarted(t, 1)
	// tasks/result waits; meanwhile a plain call and tasks/get are answered.
	send(`{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
	send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"text":"plain"}}}`)
	if m := recv(4); !strings.Contains(mustJSON(m), "echo plain") {
		t.Fatalf("plain call: %v", m)
	}
	send(`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"` + id + `"}}`)
	if m := recv(5); m["result"].(map[string]any)["status"] != "working" {
		t.Fatalf("tasks/get: %v", m)
	}
	g.release()
	if m := recv(3); !strings.Contains(mustJSON(m), "done 1") {
		t.Fatalf("tasks/result: %v", m)
	}
	_ = inW.Close()
	if err := <-listened; err != nil && err != io.EOF && err != context.Canceled {
		t.Fatalf("Listen: %v", err)
	}
	sio.Wait()
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestStdioListen: over stdio, a subscriptions/listen for a task streams
// its acknowledgement and notifications as lines, then its reply.
func TestStdioListen(t *testing.T) {
	g := newGate()
	st := openStore(t, storetest.New(t, "memory"))
	s := newMCPServer()
	testTools(s, g)
	ts, err := New(st, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close(context.Background())
	if err := ts.Enable("slow"); err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sio := ts.Stdio(ctx, inR, outW)
	go func() { _ = server.NewStdioServer(s).Listen(ctx, sio.In, sio.Out) }()
	lines := make(chan map[string]any, 16)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("output line %q is not one JSON message", sc.Text())
			}
			lines <- m
		}
	}()
	next := func() map[string]any {
		t.Helper()
		select {
		case m := <-lines:
			return m
		case <-time.After(wait):
			t.Fatal("no output")
			return nil
		}
	}
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow",`+meta+`}}`+"\n")
	id := next()["result"].(map[string]any)["taskId"].(string)
	g.waitStarted(t, 1)
	_, _ = io.WriteString(inW, `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["`+id+`"]},`+meta+`}}`+"\n")
	if m := next(); m["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("%v", m)
	}
	if m := next(); m["method"] != "notifications/tasks" {
		t.Fatalf("%v", m)
	}
	g.release()
	for {
		m := next()
		if m["id"] == 2.0 {
			if m["result"] == nil {
				t.Fatalf("the listen's reply: %v", m)
			}
			break
		}
		if m["method"] != "notifications/tasks" {
			t.Fatalf("%v", m)
		}
	}
	_ = inW.Close()
	sio.Wait()
}
