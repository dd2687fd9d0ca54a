package sidecar

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/pythontest"
	"github.com/statesidecar/state/internal/s3test"
)

// Tests of the object-store backends (STATE_BACKEND=s3 and file) through
// the sidecar's commands.

// runCommands runs the command line with the import and copy commands and
// env as the whole environment (AWS credentials come from the process's).
func runCommands(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := Env{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}
	code := Main(context.Background(), args, e, ImportCommand(), CopyCommand())
	return code, out.String(), errOut.String()
}

// objectStores returns the environments of a fresh directory store and a
// fresh S3 store (gofakes3 in this process).
func objectStores(t *testing.T) map[string]map[string]string {
	s3test.SetEnv(t)
	return map[string]map[string]string{
		"file": {"STATE_BACKEND": "file", "STATE_DIR": t.TempDir()},
		"s3":   {"STATE_BACKEND": "s3", "S3_URL": s3test.NewFake(t, nil).URL("sidecar")},
	}
}

// TestImportCommandIntoObjectStores imports the Python fixture's SQLite
// file into a directory and into S3, and checks what the sidecar then
// serves.
func TestImportCommandIntoObjectStores(t *testing.T) {
	for name, env := range objectStores(t) {
		t.Run(name, func(t *testing.T) {
			f := pythontest.Standard(time.Now())
			src := filepath.Join(t.TempDir(), "python.db")
			f.WriteSQLite(t, src)
			code, out, errOut := runCommands(t, env, "import", "-namespace", "team-a", src)
			if code != 0 {
				t.Fatalf("import: exit status %d\n%s\n%s", code, out, errOut)
			}
			if !strings.Contains(out, "into "+name+" ") {
				t.Errorf("the summary does not name the %s store:\n%s", name, out)
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
			if got := sc.Store().Backend(); got != name {
				t.Errorf("the sidecar serves backend %q, want %q", got, name)
			}
			st, _ := sc.Store().Namespace("team-a")
			f.Check(t, st, pythontest.FromSQLite)
		})
	}
}

// TestCopyCommandMovesAStoreAndBack copies a SQLite store to S3, S3 to a
// directory and the directory to a new SQLite file, and checks that every
// entry and every history entry made the journey.
func TestCopyCommandMovesAStoreAndBack(t *testing.T) {
	ctx := context.Background()
	stores := objectStores(t)
	dir := t.TempDir()
	first := "sqlite://" + filepath.Join(dir, "first.db")
	last := "sqlite://" + filepath.Join(dir, "last.db")
	src, err := state.Open(ctx, first+"?namespace=team-b")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		if _, err := src.Set(ctx, "k"+string(rune('a'+i%26))+string(rune('a'+i/26)), i); err != nil {
			t.Fatal(err)
		}
	}
	run, err := src.CreateRun(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.ClaimRun(ctx, run.ID, "agent"); err != nil {
		t.Fatal(err)
	}
	want, err := src.History(ctx, state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	hops := []string{first, stores["s3"]["S3_URL"], "file://" + stores["file"]["STATE_DIR"], last}
	for i := range len(hops) - 1 {
		// No -namespace: every backend names its namespaces.
		code, out, errOut := runCommands(t, nil, "copy", hops[i], hops[i+1])
		if code != 0 {
			t.Fatalf("copy %s %s: exit status %d\n%s\n%s", hops[i], hops[i+1], code, out, errOut)
		}
		if !strings.Contains(out, `namespace "team-b": 4`) {
			t.Errorf("copy %s %s: the summary does not name team-b:\n%s", hops[i], hops[i+1], out)
		}
		if !strings.Contains(out, "revisions start above the source's") {
			t.Errorf("copy %s %s: the target's revisions were not raised above the source's:\n%s", hops[i], hops[i+1], out)
		}
	}
	dst, err := state.Open(ctx, last+"?namespace=team-b")
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got, err := dst.History(ctx, state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d history entries after three copies, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Op != want[i].Op || got[i].Key != want[i].Key || string(got[i].Value) != string(want[i].Value) || !got[i].Time.Equal(want[i].Time) {
			t.Errorf("history entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	r, err := dst.GetRun(ctx, run.ID)
	if err != nil || r.AgentID != "agent" {
		t.Errorf("the run after three copies: %+v, %v", r, err)
	}
	code, _, errOut := runCommands(t, nil, "copy", "-namespace", "team-b", first, last)
	if code == 0 || !strings.Contains(errOut, "not empty") {
		t.Errorf("a copy into a store that holds the namespace must fail: exit status %d\n%s", code, errOut)
	}
}
