// Package skipnote lets a package's integration suites say, in the plain
// output of go test ./... (without -v), that they skipped and which
// variable would run them, such as
//
//	backend/pgstate: PostgreSQL suite skipped: set STATE_TEST_POSTGRES_URL
//
// A test helper calls Note when a suite skips for want of a variable; the
// package's TestMain runs its tests through Run, which prints the line.
//
// Without -v, go test discards the output of a package whose tests pass,
// so Run writes the line both to its own standard output (seen with -v) and
// to the go command's, when that is a terminal or a pipe (Linux only, by
// /proc/<parent>/fd/1; a regular file is left alone, since writing to it
// through a second descriptor could overwrite the go command's own output).
// A cached result replays nothing, as with any test output.
package skipnote

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu      sync.Mutex
	vars    []string          // variables whose suites skipped
	suiteOf map[string]string // variable -> what it runs ("PostgreSQL")
)

// Note records that a suite needing variable (what names the suite, such
// as "PostgreSQL") skipped because variable is unset. Calling it again for
// the same variable changes nothing.
func Note(variable, what string) {
	mu.Lock()
	defer mu.Unlock()
	if suiteOf == nil {
		suiteOf = map[string]string{}
	}
	if _, ok := suiteOf[variable]; ok {
		return
	}
	suiteOf[variable] = what
	vars = append(vars, variable)
}

// Line returns the line Run prints for package pkg, or "" when no suite
// skipped.
func Line(pkg string) string {
	mu.Lock()
	defer mu.Unlock()
	if len(vars) == 0 {
		return ""
	}
	vars := slices.Sorted(slices.Values(vars)) // the same line whatever order the tests ran in
	whats := make([]string, len(vars))
	for i, v := range vars {
		whats[i] = suiteOf[v]
	}
	noun := "suite"
	if len(vars) > 1 {
		noun = "suites"
	}
	return fmt.Sprintf("%s: %s %s skipped: set %s", pkg, strings.Join(whats, ", "), noun, strings.Join(vars, ", "))
}

// Run runs the tests of m and returns their exit code, having printed the
// package's line when a suite skipped (see the package doc).
func Run(m *testing.M) int {
	code := m.Run()
	line := Line(pkgName())
	if line == "" {
		return code
	}
	fmt.Println(line)
	if !testing.Verbose() {
		if w := goCommandOutput(); w != nil {
			_, _ = io.WriteString(w, line+"\n")
			_ = w.Close()
		}
	}
	return code
}

// pkgName is the tested package's import path without the repository's
// module path: "backend/pgstate", "examples/scale".
func pkgName() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return os.Args[0]
	}
	p := strings.TrimSuffix(bi.Path, ".test")
	return strings.TrimPrefix(p, "github.com/statesidecar/state/")
}

// goCommandOutput opens the parent process's standard output for appending
// when it is a terminal or a pipe that is not already this process's own
// standard output; otherwise it returns nil.
func goCommandOutput() io.WriteCloser {
	if runtime.GOOS != "linux" {
		return nil
	}
	path := "/proc/" + strconv.Itoa(os.Getppid()) + "/fd/1"
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if fi.Mode()&(os.ModeCharDevice|os.ModeNamedPipe) == 0 {
		return nil
	}
	if own, err := os.Stdout.Stat(); err == nil && os.SameFile(own, fi) {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}
