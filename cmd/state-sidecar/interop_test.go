package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestInteropTypeScriptSDK runs interop/ts/interop.test.mjs: the official
// MCP TypeScript SDK, which nobody here wrote, drives the built sidecar over
// Streamable HTTP (started here) and over stdio (spawned by the SDK). It
// needs node and the SDK: npm ci --prefix interop/ts.
func TestInteropTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the TypeScript SDK interop test needs node >= 20 and `npm ci --prefix interop/ts`")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop", "ts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		t.Skip("interop/ts/node_modules is missing: run `npm ci --prefix interop/ts` to install the MCP TypeScript SDK")
	}

	db := filepath.Join(t.TempDir(), "interop.db")
	p, url := startHTTP(t, "DB_PATH="+db, "SIDECAR_AUTH_TOKENS=interop-token")

	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "interop.test.mjs")
	cmd.Dir = dir
	cmd.Env = cleanEnv("SIDECAR_BIN="+binary(t), "SIDECAR_URL="+url,
		"SIDECAR_TOKEN=interop-token", "SIDECAR_DB_PATH="+db)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("node --test:\n%s", out)
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
}
