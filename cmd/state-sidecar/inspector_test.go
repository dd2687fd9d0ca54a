package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestInspectorSchemaCheck runs the MCP Inspector's CLI (pinned at 2.12.0 in
// interop/inspector), which nobody here wrote, against the built sidecar:
// tools/list with --strict prints every tool-schema portability finding on
// stderr. The sidecar's schemas must give none (before they were rewritten
// it reported 36 warnings). It needs node and `npm ci --prefix
// interop/inspector`; mcpadapter's TestSchemasArePortable applies the same
// rules without them.
func TestInspectorSchemaCheck(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Inspector check needs node and `npm ci --prefix interop/inspector`")
	}
	cli, err := filepath.Abs(filepath.Join("..", "..", "interop", "inspector", "node_modules",
		"@modelcontextprotocol", "inspector", "clients", "cli", "build", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cli); err != nil {
		t.Skip("interop/inspector/node_modules is missing: run `npm ci --prefix interop/inspector` to install the MCP Inspector")
	}

	p, url := startHTTP(t, "STATE_BACKEND=memory", "SIDECAR_AUTH_TOKENS=inspector-token")
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, url+"/mcp", "--method", "tools/list", "--strict",
		"--header", "Authorization: Bearer inspector-token")
	cmd.Env = cleanEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("inspector --method tools/list --strict: %v\nstderr: %s", err, stderr.String())
	}
	var list struct {
		Tools []struct{ Name string } `json:"tools"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &list); err != nil || len(list.Tools) != 21 {
		t.Fatalf("inspector listed %d tools (%v), want 21:\n%s", len(list.Tools), err, stdout.String())
	}
	if s := stderr.String(); strings.Contains(s, "Warning:") || strings.Contains(s, "Error:") || strings.Contains(s, "portability") {
		t.Errorf("the Inspector finds the tool schemas unportable:\n%s", s)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}
