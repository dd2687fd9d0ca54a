package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/statesidecar/state"
)

// go run ./examples/server is the same program as cmd/state-sidecar.
func TestRunsTheSidecar(t *testing.T) {
	out, err := exec.Command("go", "run", ".", "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("go run . -version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "state-sidecar "+state.Version+" (") {
		t.Errorf("go run . -version printed %q", out)
	}
}
