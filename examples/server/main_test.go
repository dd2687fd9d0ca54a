package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/statesidecar/state"
)

// beMain makes this test binary run main: the test starts its own
// executable rather than "go run ." (a second, non-race build of every
// dependency, minutes on a cold cache).
const beMain = "STATE_SERVER_TEST_BE_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(beMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// go run ./server (from examples/) is the same program as cmd/state-sidecar.
func TestRunsTheSidecar(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-version")
	cmd.Env = append(os.Environ(), beMain+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s -version: %v\n%s", exe, err, out)
	}
	if !strings.HasPrefix(string(out), "state-sidecar "+state.Version+" (") {
		t.Errorf("-version printed %q", out)
	}
}
