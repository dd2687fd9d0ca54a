package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/pythontest"
)

// TestImportBinary upgrades a Python sidecar's file with the real binary:
// serving it is refused with a message naming the import command; the
// import (into the same file) reports what it copied; the sidecar then
// serves the Python runs, keys and history to an MCP client.
func TestImportBinary(t *testing.T) {
	f := pythontest.Standard(time.Now())
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	f.WriteSQLite(t, path)
	env := []string{"DB_PATH=" + path}

	p := start(t, env, "-transport", "stdio")
	if code := p.exitCode(t); code != 2 || !strings.Contains(p.stderr.String(), "state-sidecar import "+path) {
		t.Fatalf("serving a Python file: exit status %d\n%s", code, p.stderr.String())
	}

	p = start(t, env, "import", path)
	out, _ := io.ReadAll(p.stdout)
	if code := p.exitCode(t); code != 0 || !strings.Contains(string(out), `Imported from Python sidecar SQLite file "`+path+`"`) {
		t.Fatalf("import: exit status %d\n%s\n%s", code, out, p.stderr.String())
	}
	st, err := state.Open(t.Context(), "sqlite://"+path)
	if err != nil {
		t.Fatal(err)
	}
	f.Check(t, st, pythontest.FromSQLite)
	st.Close()

	p = start(t, env, "-transport", "stdio")
	s := newStdioPeer(t, p)
	s.send(initialize)
	s.recv(1)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for i, c := range []struct {
		call string
		want []string
	}{
		{`"name":"workflow_resume","arguments":{"run_id":"wf-0000000000c3"}`,
			[]string{`"step_outputs":{"1":{"files":12},"2":{"lint_findings":[{"line":3,"msg":"unused"}]}}`, `"status":"running"`, `"agent_id":"worker-a"`, `"created_at":1718000003`}},
		{`"name":"state_get","arguments":{"key":"shared:pr-review:42:diff"}`,
			[]string{`"value":{"files":["a.go","b.go"],"lines":120}`, `"agent_id":"orchestrator"`, `"updated_at":1718000060`}},
		{`"name":"history_log","arguments":{"key":"shared:pr-review:42:diff"}`,
			[]string{`"op":"kv.import"`, `"op":"kv.set","previous_value":{"files":["a.go"]},"written_at":1718000060}`,
				`"op":"kv.set","previous_value":null,"written_at":1718000000}`, `"total":3`}},
		{`"name":"workflow_claim","arguments":{"run_id":"wf-0000000000c3","agent_id":"worker-c"}`,
			[]string{`"claimed":true`, `"attempt":2`, `"fence":2`}},
	} {
		id := float64(i + 2)
		s.send(`{"jsonrpc":"2.0","id":` + fmt.Sprint(id) + `,"method":"tools/call","params":{` + c.call + `}}`)
		got, _ := json.Marshal(s.recv(id)["result"].(map[string]any)["structuredContent"])
		for _, w := range c.want {
			if !strings.Contains(string(got), w) {
				t.Errorf("%s: %s lacks %s", c.call, got, w)
			}
		}
	}
	if err := p.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	s.drain()
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d", code)
	}
}
