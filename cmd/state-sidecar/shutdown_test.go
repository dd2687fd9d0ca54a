package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/inflight"
)

// inFlight reads the in-flight gauge from /metrics.
func inFlight(t *testing.T, baseURL string) float64 {
	t.Helper()
	resp, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "state_sidecar_http_requests_in_flight "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	t.Fatal("no in-flight gauge in /metrics")
	return 0
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// SIGTERM while calls are in flight: they finish, the process exits 0, and a
// restart on the same SQLite file finds everything.
func TestSIGTERMDrainsThenRestartKeepsData(t *testing.T) {
	db := "DB_PATH=" + filepath.Join(t.TempDir(), "state.db")
	p, url := startHTTP(t, db, "SIDECAR_READ_TIMEOUT_SECONDS=600") // the calls in flight are half-sent bodies

	tool(t, url, "state_set", map[string]any{"key": "plan", "value": map[string]any{"steps": 3}, "agent_id": "orch"})
	run := tool(t, url, "workflow_create", map[string]any{"name": "pr-review", "tags": map[string]any{"pr": "42"}})
	claim := tool(t, url, "workflow_claim", map[string]any{"run_id": run["run_id"], "agent_id": "w1"})
	tool(t, url, "workflow_checkpoint", map[string]any{"run_id": run["run_id"], "step": 2,
		"output": map[string]any{"lint": "clean"}, "agent_id": "w1", "fence": claim["fence"]})
	tool(t, url, "lease_acquire", map[string]any{"resource_id": "comment-thread", "holder_id": "w1", "ttl_seconds": 3600})
	tool(t, url, "session_save", map[string]any{"session_id": "w1:pr-42", "context": map[string]any{"next": "security"}})

	var calls []*inflight.Request
	for i := range 3 {
		calls = append(calls, inflight.Send(t, strings.TrimPrefix(url, "http://"), fmt.Sprintf(
			`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"inflight/%d","value":%d}}}`, 10+i, i, i), wait))
	}
	eventually(t, "three calls in flight", func() bool { return inFlight(t, url) == 3 })
	p.signal(t, syscall.SIGTERM)
	eventually(t, "the sidecar to stop accepting", func() bool { return refused(url) })
	for i, c := range calls {
		code, body := c.Finish(t)
		if code != http.StatusOK {
			t.Fatalf("a call in flight at SIGTERM: %d %s", code, body)
		}
		res := decodeRPC(t, []byte(body))
		if r, _ := res["result"].(map[string]any); r == nil || r["isError"] == true {
			t.Errorf("call %d in flight at SIGTERM: %v", i, res)
		}
	}
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(p.stderr.String(), "stopped cleanly") {
		t.Errorf("no clean-stop log line:\n%s", p.stderr.String())
	}

	p, url = startHTTP(t, db)
	if got := tool(t, url, "state_get", map[string]any{"key": "plan"}); got["found"] != true || got["agent_id"] != "orch" {
		t.Errorf("after restart, plan: %v", got)
	}
	for i := range calls {
		if got := tool(t, url, "state_get", map[string]any{"key": fmt.Sprintf("inflight/%d", i)}); got["value"] != json.Number(strconv.Itoa(i)) {
			t.Errorf("after restart, the write in flight at SIGTERM #%d: %v", i, got)
		}
	}
	resume := tool(t, url, "workflow_resume", map[string]any{"run_id": run["run_id"]})
	outs, _ := resume["step_outputs"].(map[string]any)
	if resume["last_step"] != json.Number("2") || outs["2"] == nil {
		t.Errorf("after restart, resume: %v", resume)
	}
	if got := tool(t, url, "lease_acquire", map[string]any{"resource_id": "comment-thread", "holder_id": "w2", "ttl_seconds": 60}); got["acquired"] != false || got["holder"] != "w1" {
		t.Errorf("after restart, w1's lease must still be held: %v", got)
	}
	if got := tool(t, url, "session_restore", map[string]any{"session_id": "w1:pr-42"}); got["found"] != true {
		t.Errorf("after restart, session: %v", got)
	}
	p.signal(t, syscall.SIGINT)
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d after SIGINT, want 0", code)
	}
}

func TestBinaryRefusesBadStarts(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown backend", []string{"STATE_BACKEND=postgresql"}, nil, []string{"STATE_BACKEND", "sqlite, redis, postgres, memory"}},
		{"protected mode", []string{"SIDECAR_HOST=0.0.0.0", "STATE_BACKEND=memory"}, nil,
			[]string{"protected mode", "SIDECAR_AUTH_TOKENS", "SIDECAR_ALLOW_INSECURE=true"}},
		{"protected mode by flag", []string{"STATE_BACKEND=memory"}, []string{"-host", "::"}, []string{"protected mode"}},
		{"unknown command", nil, []string{"imprt", "x.db"}, []string{`unknown command "imprt"`, "serve, version, help"}},
		{"stray argument", []string{"STATE_BACKEND=memory"}, []string{"-port", "0", "x"}, []string{`unexpected argument "x"`}},
		{"bad value of a used setting", []string{"STATE_BACKEND=memory", "SIDECAR_PORT=http"}, nil, []string{"SIDECAR_PORT"}},
		{"bad namespace", []string{"STATE_BACKEND=memory", "SIDECAR_AUTH_TOKENS=t:bad/ns"}, nil, []string{"SIDECAR_AUTH_TOKENS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := start(t, tc.env, tc.args...)
			out, _ := io.ReadAll(p.stdout)
			if code := p.exitCode(t); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			if len(out) != 0 {
				t.Errorf("stdout must stay empty, got %q", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.stderr.String(), w) {
					t.Errorf("stderr does not mention %q:\n%s", w, p.stderr.String())
				}
			}
		})
	}
}
