package state_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The Layout table (a Markdown table in README.md or docs/*.md) names
// every package of the repository, every example and every adapter, as
// `dir/` (or, in the row of `examples/` or `adapters/`, as `name`): internal packages, testdata and a package inside an example or
// adapter (its own business) excepted.
func TestLayoutListsEveryPackage(t *testing.T) {
	var rows []string
	docs, _ := filepath.Glob(filepath.Join("docs", "*.md"))
	for _, f := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "|") {
				rows = append(rows, line)
			}
		}
	}
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			parts := strings.Split(filepath.ToSlash(path), "/")
			if name == "internal" || name == "testdata" || name == "node_modules" || (strings.HasPrefix(name, ".") && path != ".") ||
				((parts[0] == "examples" || parts[0] == "adapters") && len(parts) > 2) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			if dir := filepath.ToSlash(filepath.Dir(path)); dir != "." && !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		parent, base := filepath.ToSlash(filepath.Dir(dir)), filepath.Base(dir)
		named := func(r string) bool {
			// `backend/pgstate/`, or a row of `examples/` that names `agent`
			return strings.Contains(r, "`"+dir+"/`") || (parent != "." && strings.Contains(r, "`"+parent+"/`") && strings.Contains(r, "`"+base+"`"))
		}
		if !slices.ContainsFunc(rows, named) {
			t.Errorf("no Layout table row in README.md or docs/*.md names `%s/`", dir)
		}
	}
}
