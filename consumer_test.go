package state_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// consumerModules are the only modules besides this one that a program
// importing the root package and backend/sqlitestate compiles, on any of
// the platforms checked below: the pure-Go SQLite driver and what it needs.
// Adding to this list is a decision: every user of the library pays for it.
var consumerModules = []string{
	"github.com/dustin/go-humanize",
	"github.com/google/uuid",
	"github.com/mattn/go-isatty",
	"github.com/ncruces/go-strftime",
	"github.com/remyoudompheng/bigfft",
	"golang.org/x/sys",
	"modernc.org/libc",
	"modernc.org/mathutil",
	"modernc.org/memory",
	"modernc.org/sqlite",
}

// TestConsumerModules checks what a library user pulls in: a scratch module
// outside this one that requires it (through a replace directive to this
// checkout) and imports the root package and backend/sqlitestate compiles
// only the modules in consumerModules, on this machine's platform and on
// linux/amd64, darwin/arm64 and windows/amd64. Dependencies of the sidecar,
// the other backends and the examples must not reach it.
func TestConsumerModules(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH:", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/consumer\n\ngo 1.26.0\n\n" +
		"require github.com/statesidecar/state v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/statesidecar/state => " + root + "\n"
	src := "package main\n\nimport (\n\t\"github.com/statesidecar/state\"\n\t_ \"github.com/statesidecar/state/backend/sqlitestate\"\n)\n\n" +
		"var _ = state.Open\n\nfunc main() {}\n"
	sum, err := os.ReadFile("go.sum") // the checksums, so that nothing asks the checksum database
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "main.go": []byte(src), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	platforms := []string{runtime.GOOS + "/" + runtime.GOARCH}
	for _, p := range []string{"linux/amd64", "darwin/arm64", "windows/amd64"} {
		if p != platforms[0] {
			platforms = append(platforms, p)
		}
	}
	for _, p := range platforms {
		goos, goarch, _ := strings.Cut(p, "/")
		cmd := exec.Command(goTool, "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"), "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("%s: go list -deps: %v\n%s", p, err, stderr)
		}
		var got []string
		for _, m := range strings.Fields(string(out)) {
			if m != "example.com/consumer" && m != "github.com/statesidecar/state" && !slices.Contains(got, m) {
				got = append(got, m)
			}
		}
		slices.Sort(got)
		for _, m := range got {
			if !slices.Contains(consumerModules, m) {
				t.Errorf("%s: a program importing state and backend/sqlitestate compiles module %s, not in consumerModules; all: %v", p, m, got)
			}
		}
		t.Logf("%s: %d modules besides this one: %v", p, len(got), got)
	}
}
