// Package inflight holds HTTP requests in flight for the sidecar's shutdown
// tests: a request whose body is sent only in part keeps the server busy
// until the test sends the rest.
package inflight

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A Request is a POST to /mcp whose body has been sent only in part.
type Request struct {
	conn net.Conn
	rest string
	wait time.Duration
}

// Send opens a connection to addr (host:port) and sends the headers and
// half of body; Finish sends the rest. It waits at most wait for the reply.
func Send(t testing.TB, addr, body string, wait time.Duration) *Request {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cut := len(body) / 2
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"+
		"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:cut]); err != nil {
		t.Fatal(err)
	}
	return &Request{conn: conn, rest: body[cut:], wait: wait}
}

// Finish sends the rest of the body and returns the response's status and
// body.
func (r *Request) Finish(t testing.TB) (int, string) {
	t.Helper()
	if _, err := io.WriteString(r.conn, r.rest); err != nil {
		t.Fatal(err)
	}
	_ = r.conn.SetReadDeadline(time.Now().Add(r.wait))
	resp, err := http.ReadResponse(bufio.NewReader(r.conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
