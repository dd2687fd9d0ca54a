package mcpadapter_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// The docs that count the tools count them right: "N tools" and "N state
// tools" in these files is the number Tools returns, except 19, the Python
// sidecar's own (which these docs compare with).
func TestToolCountInDocs(t *testing.T) {
	st, _ := statetest.NewStore(t)
	n := len(mcpadapter.Tools(st, nil))
	files := []string{
		"doc.go", "adapter.go", "handler.go", "table.go",
		filepath.Join("..", "sidecar", "doc.go"),
		filepath.Join("..", "cmd", "state-sidecar", "main.go"),
		filepath.Join("..", "cmd", "state-sidecar", "README.md"),
		filepath.Join("..", "examples", "mount", "main.go"),
	}
	count := regexp.MustCompile(`\b(\d+)\s+(?:state\s+|MCP\s+)?tools\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range count.FindAllSubmatch(b, -1) {
			if k, _ := strconv.Atoi(string(m[1])); k != n && k != 19 {
				t.Errorf("%s says %q: there are %d tools", f, m[0], n)
			}
		}
	}
}
