package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as loadgen's server process: -separate
// starts os.Executable() with -serve.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-"+serveFlag {
		if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// With -separate, each server runs in a process of its own: every row is
// measured, with the server's CPU per call, and the children are gone
// afterwards.
func TestRunSeparate(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-separate", "-backends", "sqlite,echo", "-clients", "2", "-duration", "300ms", "-warmup", "10ms",
		"-server-cpuprofile", filepath.Join(t.TempDir(), "srv")}, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if n := strings.Count(out.String(), " mcp-http "); n != 2 {
		t.Errorf("%d mcp-http rows, want 2 (sqlite and echo)", n)
	}
	if strings.Contains(out.String(), " store ") {
		t.Error("-separate must leave out the store rows: the Store is in another process")
	}
	if !strings.Contains(out.String(), "srv/call") || !strings.Contains(out.String(), "sqlite at 2 clients: median ") {
		t.Errorf("no server CPU or summary:\n%s", out.String())
	}
}

// -workload claim: each worker creates a run and claims it again and
// again, in process and over MCP, and against echo; no call fails.
func TestRunClaims(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-workload", "claim", "-backends", "sqlite,echo", "-clients", "1,3", "-duration", "50ms", "-warmup", "20ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if n := strings.Count(out.String(), " mcp-http "); n != 4 {
		t.Errorf("%d mcp-http rows, want 4", n)
	}
}

// A short run of the whole program: every row is measured and no call fails.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-clients", "1,3", "-duration", "50ms", "-warmup", "10ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	rows := 0
	for l := range strings.Lines(out.String()) {
		f := strings.Fields(l)
		if len(f) >= 8 && (f[3] == "store" || f[3] == "mcp-http") {
			rows++
			if f[7] != "0" {
				t.Errorf("a row with errors: %s", l)
			}
		}
	}
	if rows != 8 { // 2 backends × 2 concurrencies × 2 paths
		t.Errorf("%d rows, want 8:\n%s", rows, out.String())
	}
}

// With the echo server as yardstick, rounds take turns and the summary
// gives the sidecar's share of echo's calls/s.
func TestRunAgainstEcho(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"-backends", "memory,echo", "-rounds", "2", "-store=false", "-clients", "2",
		"-duration", "50ms", "-warmup", "10ms"}, &out, io.Discard)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Logf("\n%s", out.String())
	if n := strings.Count(out.String(), " mcp-http "); n != 4 {
		t.Errorf("%d mcp-http rows, want 4 (2 rounds × memory and echo)", n)
	}
	if strings.Contains(out.String(), " store ") {
		t.Error("-store=false must leave out the store rows")
	}
	if !strings.Contains(out.String(), "mcp-http calls/s ÷ echo, memory at 2 clients: median ") {
		t.Errorf("no summary against echo:\n%s", out.String())
	}
}

// -url measures a sidecar that is already running.
func TestRunAgainstURL(t *testing.T) {
	p, err := startSidecar(t.Context(), "memory", options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	}()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-url", p.url, "-clients", "2", "-duration", "50ms", "-warmup", "0s"}, &out, io.Discard); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "remote") {
		t.Errorf("no remote row:\n%s", out.String())
	}
}

func TestParseRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "0"}, {"-clients", "x"}, {"-backends", "mysql"}, {"-serve", "mysql"}, {"-workload", "claims"}, {"-duration", "0s"}, {"-rounds", "0"}, {"stray"},
	} {
		if _, err := parse(args, io.Discard); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 0.5), percentile(d, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("p50=%v p99=%v, want 50 and 99", p50, p99)
	}
	if percentile(nil, 0.5) != 0 || percentile(d[:1], 0.99) != 1 {
		t.Error("edge cases")
	}
}
