package sqlitestate_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statesidecar/state/backend/sqlitestate"
)

// An open that fails says what is wrong with the path.
func TestOpenErrorSaysWhy(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "adir.db"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ path, says string }{
		{filepath.Join(dir, "missing", "state.db"), "directory " + filepath.Join(dir, "missing") + " does not exist"},
		{filepath.Join(dir, "adir.db"), "the path is a directory"},
		{filepath.Join(dir, "afile", "state.db"), filepath.Join(dir, "afile") + " is not a directory"},
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o555); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ path, says string }{filepath.Join(ro, "state.db"), "directory " + ro + " is not writable"})
	}
	for _, c := range cases {
		d, err := sqlitestate.Open(context.Background(), c.path, nil)
		if err == nil {
			d.Close()
			t.Errorf("%s: opened", c.path)
			continue
		}
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v; want it to say %q", c.path, err, c.says)
		}
	}
}
