package sidecar

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/pythontest"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/storetest"
)

// runMain runs the command line with env as the whole environment and
// returns its exit status, stdout and stderr.
func runMain(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := Env{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
	code := Main(context.Background(), args, e, ImportCommand())
	return code, out.String(), errOut.String()
}

// targetEnv returns the environment that makes the sidecar use backend b.
func targetEnv(t *testing.T, b storetest.Backend) map[string]string {
	t.Helper()
	switch b.Name {
	case "sqlite":
		u, _ := url.Parse(b.URL)
		return map[string]string{"STATE_BACKEND": "sqlite", "DB_PATH": u.Path}
	case "redis":
		return map[string]string{"STATE_BACKEND": "redis", "REDIS_URL": b.URL}
	case "postgres":
		return map[string]string{"STATE_BACKEND": "postgres", "DATABASE_URL": b.URL}
	}
	t.Skipf("the import command does not import into %s", b.Name)
	return nil
}

// TestImportCommand runs state-sidecar import on the Python fixture's
// SQLite file into every backend the environment offers, twice, and checks
// every record and the summary; the store then serves them.
func TestImportCommand(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		env := targetEnv(t, b)
		f := pythontest.Standard(time.Now())
		src := filepath.Join(t.TempDir(), "python.db")
		f.WriteSQLite(t, src)
		code, out, errOut := runMain(t, env, "import", "-namespace", "team-a", src)
		if code != 0 {
			t.Fatalf("import: exit status %d\n%s\n%s", code, out, errOut)
		}
		for _, want := range []string{`Imported from Python sidecar SQLite file "` + src + `" into ` + b.Name + " ",
			`namespace "team-a".`, "history", "step outputs", "note: 1 step outputs belong to no run",
			"warning: history entries older than SIDECAR_HISTORY_MAX_AGE_SECONDS (604800 s"} {
			if !strings.Contains(out, want) {
				t.Errorf("the summary lacks %q:\n%s", want, out)
			}
		}
		if !strings.Contains(errOut, "state-sidecar import: runs 6/6") {
			t.Errorf("progress on stderr:\n%s", errOut)
		}
		code, out, errOut = runMain(t, env, "import", src, "-namespace", "team-a", "-quiet")
		if code != 0 || strings.Contains(errOut, "state-sidecar import:") {
			t.Fatalf("import again (-quiet: no progress): exit status %d\n%s\n%s", code, out, errOut)
		}
		if !regexp.MustCompile(`\n\s*runs\s+6\s+0\s+6\s+0\s+0\s+0\s*\n`).MatchString(out) {
			t.Errorf("a second import must find the 6 runs already there:\n%s", out)
		}
		cfg, err := Load(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		sc, err := New(context.Background(), cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		defer sc.Close()
		st, _ := sc.Store().Namespace("team-a")
		f.Check(t, st, pythontest.FromSQLite)
	})
}

// TestImportCommandInPlaceThenServe: with the defaults' shape (DB_PATH is
// the Python file) the sidecar refuses to serve the Python file, naming the
// import command; the import adds the store beside the Python tables, and
// the sidecar then serves the imported data.
func TestImportCommandInPlaceThenServe(t *testing.T) {
	f := pythontest.Standard(time.Now())
	path := filepath.Join(t.TempDir(), "state_sidecar.db")
	f.WriteSQLite(t, path)
	env := map[string]string{"DB_PATH": path}
	cfg, _ := Load(nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &bytes.Buffer{})
	_, err := New(context.Background(), cfg, testLogger(t))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "state-sidecar import "+path) || !strings.Contains(err.Error(), "Python MCP State Sidecar database") {
		t.Fatalf("serving a Python file: %v", err)
	}
	code, _, errOut := runMain(t, env, "-port", "0")
	if code != 2 || !strings.Contains(errOut, "state-sidecar import "+path) {
		t.Errorf("state-sidecar on a Python file: exit status %d, %s", code, errOut)
	}
	code, out, errOut := runMain(t, env, "import", path)
	if code != 0 || !strings.Contains(out, "(the same file: the store's tables beside the Python ones") {
		t.Fatalf("import in place: exit status %d\n%s\n%s", code, out, errOut)
	}
	sc, err := New(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatalf("serving the file after the import: %v", err)
	}
	defer sc.Close()
	f.Check(t, sc.Store(), pythontest.FromSQLite)
}

// TestImportCommandDryRun reports counts and writes nothing: no target
// file appears.
func TestImportCommandDryRun(t *testing.T) {
	f := pythontest.Standard(time.Now())
	src := filepath.Join(t.TempDir(), "python.db")
	f.WriteSQLite(t, src)
	target := filepath.Join(t.TempDir(), "state.db")
	code, out, errOut := runMain(t, map[string]string{"DB_PATH": target}, "import", "-dry-run", src)
	if code != 0 {
		t.Fatalf("exit status %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "Dry run, nothing written") || !strings.Contains(out, "would import") ||
		!regexp.MustCompile(`\n\s*keys\s+6\s+5\s+0\s+1\s+0\s+0\s*\n`).MatchString(out) {
		t.Errorf("dry run summary:\n%s", out)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a dry run created the target: %v", err)
	}
	code, out, _ = runMain(t, map[string]string{"STATE_BACKEND": "memory"}, "import", "-dry-run", "-quiet", src)
	if code != 0 || !strings.Contains(out, "Dry run") {
		t.Errorf("a dry run needs no store at all: %d %s", code, out)
	}
}

// TestImportCommandFromRedis imports the Python fixture's Redis layout (on
// a Redis of the test's own) into a SQLite file.
func TestImportCommandFromRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	f := pythontest.Standard(time.Now())
	f.WriteRedis(t, rdb)
	target := filepath.Join(t.TempDir(), "state.db")
	code, out, errOut := runMain(t, map[string]string{"DB_PATH": target}, "import", srv.URL())
	if code != 0 || !strings.Contains(out, "Imported from Python sidecar Redis "+srv.URL()) {
		t.Fatalf("exit status %d\n%s\n%s", code, out, errOut)
	}
	st := storetest.Open(t, "sqlite://"+target, nil)
	f.Check(t, st, pythontest.FromRedis)
}

// TestImportCommandBadInput: each mistake is a clear error with the right
// exit status, and writes nothing.
func TestImportCommandBadInput(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	_ = os.WriteFile(text, bytes.Repeat([]byte("not a database\n"), 100), 0o600)
	python := filepath.Join(dir, "python.db")
	pythontest.Standard(time.Now()).WriteSQLite(t, python)
	other := filepath.Join(dir, "other.db")
	pythontest.Standard(time.Now()).WriteSQLite(t, other)
	empty := redistest.Start(t)
	target := filepath.Join(dir, "state.db")
	env := map[string]string{"DB_PATH": target}
	for _, c := range []struct {
		env  map[string]string
		args []string
		code int
		says string
	}{
		{env, []string{"import"}, 2, "import needs the Python sidecar's data"},
		{env, []string{"import", "a.db", "b.db"}, 2, `import takes one source, got "a.db" and "b.db"`},
		{env, []string{"import", "-namespace", "no/slash", python}, 2, "-namespace: namespace may contain only"},
		{map[string]string{"STATE_BACKEND": "memory"}, []string{"import", python}, 2, "STATE_BACKEND=memory keeps nothing"},
		{env, []string{"import", filepath.Join(dir, "missing.db")}, 1, "no such file"},
		{env, []string{"import", text}, 1, "not the data of a Python MCP State Sidecar: it is not a SQLite database"},
		{env, []string{"import", empty.URL()}, 1, "not the data of a Python MCP State Sidecar: it has no key kv:*"},
		{map[string]string{"DB_PATH": other}, []string{"import", python}, 2, "DB_PATH " + other + " is another Python sidecar's database"},
		{env, []string{"import", "-max-value-bytes", "30", python}, 1, "records were refused (listed above)"},
	} {
		code, out, errOut := runMain(t, c.env, c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%v: exit status %d, %q; want %d and %q\n%s", c.args, code, errOut, c.code, c.says, out)
		}
	}
	code, out, errOut := runMain(t, env, "import", "-max-value-bytes", "30", python)
	if code != 1 || !strings.Contains(out, `refused: keys "shared:pr-review:42:diff": value is 37 bytes as JSON, the limit is 30`) {
		t.Errorf("refused records are listed with why:\n%s", out)
	}
	code, out, errOut = runMain(t, env, "import", "-h")
	if code != 0 || !strings.Contains(out, "SOURCE is the Python sidecar's SQLite file") || !strings.Contains(out, "-dry-run") || errOut != "" {
		t.Errorf("import -h: %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, _ = runMain(t, env, "help")
	if code != 0 || !strings.Contains(out, "state-sidecar import [-namespace ns] [-dry-run] SOURCE") {
		t.Errorf("the help lists the import command: %d\n%s", code, out)
	}
	// The Python file that was refused as a target is still only Python's.
	st, err := state.Open(context.Background(), "sqlite://"+other)
	if err == nil {
		st.Close()
		t.Errorf("a refused import made %s a store", other)
	}
}
