package sidecar

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"strings"
	"testing"
)

// TestHealthcheckCommand: the healthcheck command finds the sidecar by
// SIDECAR_HOST and SIDECAR_PORT (a wildcard host asked on loopback) and
// exits 0 while it is ready, 1 once it drains or when nothing listens.
func TestHealthcheckCommand(t *testing.T) {
	r := startHTTP(t, memConfig())
	u, _ := url.Parse(r.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	run := func(vars map[string]string, args ...string) (int, string) {
		var stderr bytes.Buffer
		env := Env{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
			Stdout: &bytes.Buffer{}, Stderr: &stderr}
		return Main(context.Background(), append([]string{"healthcheck"}, args...), env), stderr.String()
	}
	for _, tc := range []struct {
		vars map[string]string
		args []string
	}{
		{map[string]string{"SIDECAR_PORT": port}, nil},
		{map[string]string{"SIDECAR_PORT": port, "SIDECAR_HOST": "0.0.0.0"}, nil},
		{map[string]string{"SIDECAR_PORT": port}, []string{"-live"}},
		{nil, []string{"-port", port, "-timeout-seconds", "10"}},
		// A bad setting the check does not use does not fail it.
		{map[string]string{"SIDECAR_PORT": port, "REDIS_URL": "nonsense", "STATE_BACKEND": "redis"}, nil},
	} {
		if code, stderr := run(tc.vars, tc.args...); code != 0 {
			t.Errorf("healthcheck %v %v: exit %d, want 0: %s", tc.vars, tc.args, code, stderr)
		}
	}
	if code, stderr := run(map[string]string{"SIDECAR_PORT": "nonsense"}); code != 2 || !strings.Contains(stderr, "SIDECAR_PORT") {
		t.Errorf("healthcheck with a bad port: exit %d, want 2 naming SIDECAR_PORT: %s", code, stderr)
	}

	r.draining.Store(true) // as once SIGTERM came: /readyz fails, /healthz does not
	if code, stderr := run(map[string]string{"SIDECAR_PORT": port}); code != 1 || !strings.Contains(stderr, "503") {
		t.Errorf("healthcheck while draining: exit %d, want 1 with the 503: %s", code, stderr)
	}
	if code, _ := run(map[string]string{"SIDECAR_PORT": port}, "-live"); code != 0 {
		t.Errorf("healthcheck -live while draining: exit %d, want 0", code)
	}
	r.draining.Store(false)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, closed, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	if code, stderr := run(map[string]string{"SIDECAR_PORT": closed}); code != 1 || !strings.Contains(stderr, "unhealthy") {
		t.Errorf("healthcheck with nothing listening: exit %d, want 1: %s", code, stderr)
	}
}
