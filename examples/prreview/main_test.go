package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/syncbuf"
)

// wait bounds every real wait of these tests: generous, because the machine
// may be busy. A wait that ends early is never a failure.
const wait = 3 * time.Minute

func TestMain(m *testing.M) {
	// The dashboard starts its agents as "<this binary> agent ...": in a
	// test, this binary is the test binary.
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	// The shutdown test runs the whole program as a process of its own.
	if os.Getenv("PRREVIEW_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(leavesNothing(m))
}

// leavesNothing runs the tests with a temporary directory of their own
// (TMPDIR, which the agents, the demo's own sidecar and Chromium inherit)
// and fails them if anything is left in it afterwards.
func leavesNothing(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "prt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	os.Setenv("TMPDIR", tmp)
	code := m.Run()
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		var names []string
		for _, e := range left {
			names = append(names, e.Name())
		}
		fmt.Fprintf(os.Stderr, "FAIL: the tests left %s in the temporary directory\n", strings.Join(names, ", "))
		if code == 0 {
			code = 1
		}
	}
	return code
}

// deadURL returns the URL of a loopback port where nothing listens: a
// sidecar that is down.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

// A harness is a dashboard running in this process (with its own sidecar
// unless -sidecar is given), its agents real processes.
type harness struct {
	URL    string
	stderr *syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startDemo runs the dashboard with args on a free port and returns once
// it serves. It is stopped when the test ends.
func startDemo(t *testing.T, args ...string) *harness {
	t.Helper()
	return startDemoEnv(t, nil, args...)
}

// startDemoEnv is startDemo with env as the only environment variables the
// dashboard sees (none of the developer's PRREVIEW_* or GITHUB_* settings).
func startDemoEnv(t *testing.T, env map[string]string, args ...string) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{stderr: &syncbuf.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	pr, pw := io.Pipe()
	go func() {
		h.done <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-claim-ttl", "2s"}, args...),
			func(k string) string { return env[k] }, pw, h.stderr)
		pw.Close()
	}()
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "PR-review demo: open "); ok {
				first <- u
			}
		}
		close(first)
	}()
	select {
	case u, ok := <-first:
		if !ok {
			t.Fatalf("the dashboard did not start: %v\n%s", <-h.done, h.stderr.String())
		}
		h.URL = u
	case <-time.After(wait):
		t.Fatal("the dashboard did not print its URL")
	}
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Errorf("stopping the dashboard: %v", err)
		}
		if t.Failed() {
			t.Logf("dashboard stderr:\n%s", h.stderr.String())
		}
	})
	return h
}

// stop stops the dashboard (as Ctrl-C does) and returns run's result.
func (h *harness) stop() error {
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(wait):
		return fmt.Errorf("run did not return")
	}
}

// post presses a button: it returns the status and the decoded answer.
func (h *harness) post(t *testing.T, path string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	res, err := http.Post(h.URL+"/api/"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("POST %s: the answer is not JSON: %v", path, err)
	}
	return res.StatusCode, out
}

// ok presses a button that must work.
func (h *harness) ok(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	status, out := h.post(t, path, body)
	if status != http.StatusOK {
		t.Fatalf("POST %s %v: %d %v", path, body, status, out)
	}
	return out
}

// refused presses a button that must be refused with a message containing want.
func (h *harness) refused(t *testing.T, path string, body any, wantStatus int, want string) {
	t.Helper()
	status, out := h.post(t, path, body)
	msg, _ := out["error"].(string)
	if status != wantStatus || !strings.Contains(msg, want) {
		t.Errorf("POST %s %v: %d %q, want %d and a message with %q", path, body, status, msg, wantStatus, want)
	}
}

// state reads the page's snapshot.
func (h *harness) state(t *testing.T) snapshot {
	t.Helper()
	res, err := http.Get(h.URL + "/api/state")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var s snapshot
	if err := json.NewDecoder(res.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitState polls the snapshot until cond holds.
func (h *harness) waitState(t *testing.T, what string, cond func(s snapshot) bool) snapshot {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		s := h.state(t)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(s.Workers, "", " ")
			t.Fatalf("timed out waiting until %s; workers:\n%s", what, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run returns the run of the pipeline with id.
func (s snapshot) run(id string) (runInfo, bool) {
	for _, r := range s.Runs {
		if r.RunID == id {
			return r, true
		}
	}
	return runInfo{}, false
}

// reviewStatus is the status of the kind's reviewer run.
func (s snapshot) reviewStatus(kind string) string {
	if s.Pipeline == nil {
		return ""
	}
	r, _ := s.run(s.Pipeline.Children[kind])
	return r.Status
}

// workersOf returns the workers of kind.
func (s snapshot) workersOf(kind string) []worker {
	var out []worker
	for _, w := range s.Workers {
		if w.Kind == kind {
			out = append(out, w)
		}
	}
	return out
}
