package main

import (
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/statesidecar/state"
)

// -version and the version command print the version on stdout, exit 0.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"version"}, {"serve", "-version"}} {
		p := start(t, nil, args...)
		out, _ := io.ReadAll(p.stdout)
		if code := p.exitCode(t); code != 0 {
			t.Errorf("%v: exit status %d", args, code)
		}
		want := "state-sidecar " + state.Version + " ("
		if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), runtime.Version()) {
			t.Errorf("%v printed %q, want %q... with the Go version", args, out, want)
		}
	}
}

// -h shows every setting with its variable and default, and exits 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"help"}, {"serve", "-help"}} {
		p := start(t, nil, args...)
		out, _ := io.ReadAll(p.stdout)
		if code := p.exitCode(t); code != 0 {
			t.Errorf("%v: exit status %d", args, code)
		}
		help := string(out) + p.stderr.String()
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`-backend\s+STATE_BACKEND\s+sqlite\s`),
			regexp.MustCompile(`-db-path\s+DB_PATH\s+state_sidecar\.db\s`),
			regexp.MustCompile(`-history-max-events\s+SIDECAR_HISTORY_MAX_EVENTS\s+100000\s`),
			regexp.MustCompile(`-sweep-interval-seconds\s+SIDECAR_SWEEP_INTERVAL_SECONDS\s+60\s`),
			regexp.MustCompile(`-max-value-bytes\s+SIDECAR_MAX_VALUE_BYTES\s+1048576\s`),
			regexp.MustCompile(`-request-timeout-seconds\s+SIDECAR_REQUEST_TIMEOUT_SECONDS\s+30\s`),
			regexp.MustCompile(`state-sidecar version`),
		} {
			if !want.MatchString(help) {
				t.Errorf("%v: the help lacks %s:\n%s", args, want, help)
			}
		}
	}
}

// Deployment templates set unused variables to "": a SQLite sidecar with
// REDIS_URL="" (and every other variable empty) starts on its defaults, and
// a bad value of a setting the backend does not use is only a warning.
func TestEmptyAndUnusedSettingsDoNotStopStartup(t *testing.T) {
	env := []string{"REDIS_URL=", "SIDECAR_HOST=", "SIDECAR_AUTH_TOKENS=", "SIDECAR_CLAIM_TTL_SECONDS=",
		"STATE_BACKEND=", "SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS=", "DB_PATH=" + filepath.Join(t.TempDir(), "empty.db")}
	p, url := startHTTP(t, env...)
	if got := tool(t, url, "state_set", map[string]any{"key": "k", "value": 1}); got["ok"] != true {
		t.Errorf("state_set: %v", got)
	}
	if got := p.logLine(t, "MCP State Sidecar starting"); got["backend"] != "sqlite" || got["host"] != "127.0.0.1" {
		t.Errorf("empty variables must leave the defaults: %v", got)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Errorf("exit status %d", code)
	}

	p, url = startHTTP(t, "STATE_BACKEND=memory", "REDIS_URL=not a url", "SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS=soon")
	tool(t, url, "state_get", map[string]any{"key": "k"})
	p.logLine(t, "setting ignored")
	for _, name := range []string{"REDIS_URL ignored", "SIDECAR_SQLITE_LOCK_TIMEOUT_SECONDS ignored"} {
		if !strings.Contains(p.stderr.String(), name) {
			t.Errorf("the log must name the ignored setting %s:\n%s", name, p.stderr.String())
		}
	}
	p.signal(t, syscall.SIGTERM)
	p.exitCode(t)
}

// SIDECAR_HOST=[::1] (and ::1) serve on the IPv6 loopback.
func TestIPv6Host(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("this machine has no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	for _, host := range []string{"[::1]", "::1"} {
		p, url := startHTTP(t, "STATE_BACKEND=memory", "SIDECAR_HOST="+host)
		if !strings.HasPrefix(url, "http://[::1]:") {
			t.Fatalf("SIDECAR_HOST=%s listens on %s, want [::1]", host, url)
		}
		if got := tool(t, url, "state_set", map[string]any{"key": "v6", "value": true}); got["ok"] != true {
			t.Errorf("state_set over IPv6: %v", got)
		}
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ok") {
			t.Errorf("/healthz over IPv6: %d %s", resp.StatusCode, body)
		}
		p.signal(t, syscall.SIGTERM)
		if code := p.exitCode(t); code != 0 {
			t.Errorf("exit status %d", code)
		}
	}
}
