package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/skipnote"
	"github.com/statesidecar/state/internal/syncbuf"
)

// wait bounds every real wait: generous, because the machine may be busy.
const wait = 3 * time.Minute

// beMain is the variable under which this test binary is the sidecar: the
// tests run their own executable as state-sidecar instead of building the
// command again with go build (a second, non-race build of every
// dependency: minutes on a cold cache, inside the package's timeout).
const beMain = "STATE_SIDECAR_TEST_BE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		main() // exits
		os.Exit(0)
	}
	// Children inherit it, including a sidecar that the interop tests'
	// Node clients start.
	os.Setenv(beMain, "1")
	os.Exit(skipnote.Run(m))
}

// binary returns the path of the state-sidecar program: this test binary,
// which runs main when started with beMain=1 in its environment.
func binary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// cleanEnv is the test's environment without any sidecar variable, so that
// a developer's own settings cannot leak into a test.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SIDECAR_") || strings.HasPrefix(k, "OTEL_") || k == "STATE_BACKEND" || k == "DB_PATH" || k == "REDIS_URL" || k == "DATABASE_URL" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// proc is a running sidecar binary.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.Reader
	stderr *syncbuf.Buffer
	done   chan struct{}
	err    error
}

// start runs the binary with a clean environment plus env.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = cleanEnv(env...)
	return run(t, cmd)
}

// run starts cmd with pipes to its stdin and stdout and its stderr
// collected; it is killed, if still running, when the test ends.
func run(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{cmd: cmd, stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	// A pipe of our own rather than StdoutPipe: Wait, which runs at once
	// below, closes StdoutPipe's reading end as soon as the process exits,
	// cutting off output not yet read; this one ends only at EOF.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	p.stdout, p.cmd.Stdout = r, w
	err = p.cmd.Start()
	_ = w.Close() // the child holds its own copy
	if err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("sidecar stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

// exitCode waits for the process to end and returns its exit status.
func (p *proc) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Fatalf("the sidecar did not exit; stderr:\n%s", p.stderr.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		t.Fatal(p.err)
	}
	return 0
}

func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// logLine waits for a JSON log line with msg and returns it.
func (p *proc) logLine(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		for l := range strings.Lines(p.stderr.String()) {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				return m
			}
		}
		select {
		case <-p.done:
			t.Fatalf("the sidecar exited before logging %q: %v", msg, p.err)
		case <-time.After(10 * time.Millisecond): // polling interval, not synchronisation
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q log line", msg)
		}
	}
}

// startHTTP runs the binary in HTTP mode on a free loopback port, with JSON
// logs, and returns it with its base URL.
func startHTTP(t *testing.T, env ...string) (*proc, string) {
	t.Helper()
	p := start(t, append([]string{"SIDECAR_PORT=0", "SIDECAR_LOG_FORMAT=json"}, env...))
	addr, _ := p.logLine(t, "listening")["addr"].(string)
	if addr == "" {
		t.Fatal("the listening log line has no addr")
	}
	return p, "http://" + addr
}

// rpc posts one JSON-RPC message to /mcp (stateless, protocol 2025-11-25,
// no session) and returns the decoded response.
func rpc(t *testing.T, baseURL, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, baseURL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /mcp %s: %d %s", body, resp.StatusCode, b)
	}
	return decodeRPC(t, b)
}

// decodeRPC decodes a JSON-RPC response, plain or as one SSE event.
func decodeRPC(t *testing.T, b []byte) map[string]any {
	t.Helper()
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("event:")) || bytes.HasPrefix(bytes.TrimSpace(b), []byte("data:")) {
		for l := range strings.Lines(string(b)) {
			if d, ok := strings.CutPrefix(l, "data:"); ok {
				b = []byte(d)
			}
		}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("response %q: %v", b, err)
	}
	return m
}

// tool calls a tool over HTTP and returns its structured result; it fails
// the test on a protocol error or a tool error.
func tool(t *testing.T, baseURL, name string, args map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	m := rpc(t, baseURL, string(body))
	res, _ := m["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		t.Fatalf("%s(%v): %v", name, args, m)
	}
	sc, _ := res["structuredContent"].(map[string]any)
	return sc
}

// refused reports whether nothing accepts connections at baseURL any more.
func refused(baseURL string) bool {
	c, err := net.Dial("tcp", strings.TrimPrefix(baseURL, "http://"))
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// readLines reads stdout lines as they come.
func readLines(r io.Reader) <-chan string {
	ch := make(chan string, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			ch <- sc.Text()
		}
	}()
	return ch
}
