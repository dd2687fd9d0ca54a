package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/statetest"
)

// optionCalls are the methods that take options, each with a call that
// takes its options where %s is, and the options it honours.
var optionCalls = []struct {
	method, iface, call string
	honours             []string
}{
	{"Set", "SetOption", `st.Set(ctx, "k", 1, %s)`, []string{"WithTTL", "WithAgent", "IfVersion", "WithSubject"}},
	{"SetSession", "SetOption", `st.SetSession(ctx, "s", map[string]any{}, %s)`, []string{"WithTTL", "WithAgent", "IfVersion", "WithSubject"}},
	{"SetMany", "SetManyOption", `st.SetMany(ctx, nil, %s)`, []string{"WithTTL", "WithAgent", "WithSubject"}},
	{"Delete", "DeleteOption", `st.Delete(ctx, "k", %s)`, []string{"WithAgent", "IfVersion"}},
	{"DeleteSession", "DeleteOption", `st.DeleteSession(ctx, "s", %s)`, []string{"WithAgent", "IfVersion"}},
	{"DeleteRun", "DeleteRunOption", `st.DeleteRun(ctx, "wf-1", %s)`, []string{"WithAgent"}},
	{"List", "ListOption", `st.List(ctx, "", %s)`, []string{"WithLimit", "WithCursor"}},
	{"ListRuns", "ListOption", `st.ListRuns(ctx, %s)`, []string{"WithLimit", "WithCursor"}},
	{"CreateRun", "CreateOption", `st.CreateRun(ctx, "job", nil, %s)`, []string{"WithAgent", "WithParent", "WithJoin", "WithIdempotencyKey", "WithSubject"}},
	{"ClaimRun", "ClaimOption", `st.ClaimRun(ctx, "wf-1", "A", %s)`, []string{"WithClaimTTL"}},
	{"CheckpointRun", "CheckpointOption", `st.CheckpointRun(ctx, "wf-1", 1, "x", %s)`, []string{"WithAgent", "WithFence", "WithStatus"}},
	{"CompleteRun", "FinishOption", `st.CompleteRun(ctx, "wf-1", %s)`, []string{"WithAgent", "WithFence"}},
	{"FailRun", "FinishOption", `st.FailRun(ctx, "wf-1", %s)`, []string{"WithAgent", "WithFence"}},
	{"Once", "OnceOption", `st.Once(ctx, "k", nil, %s)`, []string{"WithTTL", "WithClaimTTL"}},
}

// everyOption is every per-call option: a call of its constructor and the
// type the constructor returns.
var everyOption = []struct{ name, call, typ string }{
	{"WithTTL", "state.WithTTL(time.Minute)", "TTLOption"},
	{"WithAgent", `state.WithAgent("A")`, "AgentOption"},
	{"IfVersion", "state.IfVersion(0)", "VersionOption"},
	{"WithClaimTTL", "state.WithClaimTTL(time.Minute)", "ClaimTTLOption"},
	{"WithFence", "state.WithFence(3)", "FenceOption"},
	{"WithStatus", "state.WithStatus(state.StatusDone)", "CheckpointOption"},
	{"WithLimit", "state.WithLimit(5)", "ListOption"},
	{"WithCursor", `state.WithCursor("")`, "ListOption"},
	{"WithParent", `state.WithParent("wf-1")`, "CreateOption"},
	{"WithJoin", "state.WithJoin()", "CreateOption"},
	{"WithIdempotencyKey", `state.WithIdempotencyKey("i")`, "CreateOption"},
	{"WithSubject", `state.WithSubject("alice")`, "SubjectOption"},
}

// buildProgram compiles a main package whose body is lines, reporting every
// type error (-gcflags=-e), and returns the compiler's output by line of
// body (1-based) and whether the build succeeded. The program is laid over
// testdata/optcheck with -overlay, so nothing is written into the module.
func buildProgram(t *testing.T, lines []string) (map[int]string, bool) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH:", err)
	}
	const header = "package main\n\nimport (\n\t\"context\"\n\t\"time\"\n\n\t\"github.com/statesidecar/state\"\n)\n\n" +
		"var _ = time.Second\n\nfunc main() {\n\tvar st *state.Store\n\tctx := context.Background()\n\t_ = ctx\n"
	first := strings.Count(header, "\n") + 1 // the line of lines[0]
	src := header + strings.Join(lines, "\n") + "\n}\n"
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(root, "testdata", "optcheck", "main.go"): file}})
	ovFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "-o", os.DevNull, "-gcflags=-e", "-overlay=" + ovFile}
	if raceEnabled {
		args = append(args, "-race") // the test's own build: its packages are cached
	}
	cmd := exec.Command(goTool, append(args, "./testdata/optcheck")...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("go build could not run: %v\n%s", err, out)
		}
	}
	// The go command names the file by a path relative to the module's
	// directory when that is shorter, so paths are compared as files.
	byLine := map[int]string{}
	want, serr := os.Stat(file)
	if serr != nil {
		t.Fatal(serr)
	}
	pos := regexp.MustCompile(`^(.+):(\d+):\d+: (.*)$`)
	for l := range strings.SplitSeq(string(out), "\n") {
		m := pos.FindStringSubmatch(l)
		if m == nil {
			if l != "" && !strings.HasPrefix(l, "#") {
				t.Logf("go build: %s", l)
			}
			continue
		}
		path := m[1]
		if !filepath.IsAbs(path) {
			path = filepath.Join(root, path)
		}
		if fi, err := os.Stat(path); err != nil || !os.SameFile(fi, want) {
			t.Logf("go build, outside the program: %s", l)
			continue
		}
		n, _ := strconv.Atoi(m[2])
		byLine[n-first+1] += m[3]
	}
	if err != nil && len(byLine) == 0 {
		t.Fatalf("go build failed, but not on a line of the program:\n%s", out)
	}
	return byLine, err == nil
}

// TestOptionsEveryMethodHonoursCompile builds a program that passes every
// method each option it honours (and a nil option, which is skipped): it
// must compile.
func TestOptionsEveryMethodHonoursCompile(t *testing.T) {
	var lines []string
	for _, m := range optionCalls {
		var opts []string
		for _, o := range everyOption {
			if slices.Contains(m.honours, o.name) {
				opts = append(opts, o.call)
			}
		}
		lines = append(lines, "\t"+fmt.Sprintf(m.call, strings.Join(append(opts, "nil"), ", ")))
	}
	errs, ok := buildProgram(t, lines)
	if !ok {
		for i, l := range lines {
			if e := errs[i+1]; e != "" {
				t.Errorf("a call with the options its method honours must compile:\n%s\n%s", strings.TrimSpace(l), e)
			}
		}
	}
}

// TestOptionsAMethodDoesNotHonourDoNotCompile builds a program with one
// call per method and option the method does not honour: each of them, and
// nothing else, must fail to compile, with the compiler saying that the
// option's type is not the method's option type.
func TestOptionsAMethodDoesNotHonourDoNotCompile(t *testing.T) {
	type misuse struct{ method, option, want string }
	var (
		lines []string
		cases []misuse
	)
	for _, m := range optionCalls {
		for _, o := range everyOption {
			if slices.Contains(m.honours, o.name) {
				continue
			}
			lines = append(lines, "\t"+fmt.Sprintf(m.call, o.call))
			cases = append(cases, misuse{m.method, o.name,
				fmt.Sprintf("state.%s does not implement state.%s", o.typ, m.iface)})
		}
	}
	if len(lines) < 80 {
		t.Fatalf("only %d misuses to check: the tables lost rows", len(lines))
	}
	errs, ok := buildProgram(t, lines)
	if ok {
		t.Fatal("a program passing methods options they do not honour compiled")
	}
	for i, m := range cases {
		if got := errs[i+1]; !strings.Contains(got, m.want) {
			t.Errorf("%s(%s) must not compile, with %q; the compiler said %q", m.method, m.option, m.want, got)
		}
		delete(errs, i+1)
	}
	for n, e := range errs {
		t.Errorf("an error on line %d, which is none of the misuses: %s", n, e)
	}
}

// TestOptionsNilIsSkipped: a nil option is no option, as it was when
// options were functions.
func TestOptionsNilIsSkipped(t *testing.T) {
	ctx := context.Background()
	st, _ := statetest.NewStore(t)
	e, err := st.Set(ctx, "k", "v", nil, state.WithAgent("A"), nil)
	if err != nil || e.AgentID != "A" || !e.ExpiresAt.IsZero() {
		t.Fatalf("Set with nil options: %+v, %v", e, err)
	}
	if _, err := st.List(ctx, "", nil); err != nil {
		t.Fatalf("List with a nil option: %v", err)
	}
}
