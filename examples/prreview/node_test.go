package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/statesidecar/state/examples/prreview/review"
)

// needNode skips unless node and the Node reviewer's SDK are installed.
func needNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the Node reviewer needs node >= 20 and `npm ci --prefix examples/prreview/node`")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Skip("examples/prreview/node/node_modules is missing: run `npm ci --prefix examples/prreview/node` to install the MCP TypeScript SDK")
	}
	return node
}

// The Node reviewer and the Go one read the same rule file: on every
// bundled PR they find exactly the same things.
func TestNodeReviewerMatchesGo(t *testing.T) {
	node := needNode(t)
	for _, meta := range review.BundledPRs() {
		pr, err := review.Bundled(meta.ID)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), meta.ID+".diff")
		if err := os.WriteFile(file, []byte(pr.Diff), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(node, filepath.Join("node", "reviewer.mjs"), "-analyze", file).Output()
		if err != nil {
			t.Fatalf("%s: node: %v", meta.ID, err)
		}
		var fromNode []review.Finding
		if err := json.Unmarshal(out, &fromNode); err != nil {
			t.Fatalf("%s: %v\n%s", meta.ID, err, out)
		}
		files, _ := pr.Files()
		fromGo := []review.Finding{}
		for _, f := range files {
			fs, _ := review.ReviewFile(review.Style, f)
			fromGo = append(fromGo, fs...)
		}
		if len(fromNode) == 0 && len(fromGo) == 0 {
			continue
		}
		if !reflect.DeepEqual(fromNode, fromGo) {
			t.Errorf("%s: Node found\n%v\nGo found\n%v", meta.ID, fromNode, fromGo)
		}
	}
}

// Node agents (the official MCP TypeScript SDK) race for the style review;
// the winner is killed mid-run and a Go agent takes over from its last
// checkpoint: two frameworks, one run, coordinated only by the sidecar.
func TestNodeAgentsRaceAndGoTakesOver(t *testing.T) {
	needNode(t)
	h := startDemo(t)
	if s := h.state(t); !s.Node.Available {
		t.Fatalf("the dashboard does not find the Node reviewer: %s", s.Node.Hint)
	}
	h.ok(t, "pr", map[string]string{"input": "bundled:" + review.TalkPR})
	h.ok(t, "register", nil)
	h.ok(t, "pace", map[string]string{"pace": "slow"})
	h.ok(t, "spawn", map[string]any{"kind": "style", "lang": "node", "count": 3})
	s := h.waitState(t, "a Node agent won and checkpointed", func(s snapshot) bool {
		for _, w := range s.workersOf("style") {
			if w.State == "working" && w.Step >= 1 {
				return true
			}
		}
		return false
	})
	var first worker
	lost := 0
	for _, w := range s.workersOf("style") {
		if w.Lang != "node" {
			t.Errorf("agent %s is %s, want node", w.ID, w.Lang)
		}
		if w.State == "working" {
			first = w
		}
	}
	s = h.waitState(t, "the race is settled", func(s snapshot) bool {
		lost = 0
		for _, m := range s.Races[0].Members {
			if m.Outcome == "lost" {
				lost++
			}
		}
		return lost == 2
	})
	if s.Races[0].Winner != first.ID {
		t.Errorf("winner %s, working agent %s", s.Races[0].Winner, first.ID)
	}
	h.ok(t, "crash", map[string]string{"kind": "style"})
	h.waitState(t, "the Node agent is gone", func(s snapshot) bool {
		for _, w := range s.workersOf("style") {
			if w.ID == first.ID {
				return !w.Alive
			}
		}
		return false
	})
	h.ok(t, "pace", map[string]string{"pace": "fast"})
	h.ok(t, "spawn", map[string]any{"kind": "style", "lang": "go"})
	s = h.waitState(t, "the Go agent finished the style review", func(s snapshot) bool { return s.reviewStatus("style") == "done" })
	c, _ := newMCPClient(s.Sidecar.URL, "", "test")
	defer c.Close()
	var res resumeResult
	if err := c.callInto(context.Background(), "workflow_resume", map[string]any{"run_id": s.Pipeline.Children["style"]}, &res); err != nil {
		t.Fatal(err)
	}
	langs := map[string]bool{}
	for i := 1; i <= int(res.LastStep); i++ {
		var o stepOutput
		_ = json.Unmarshal(res.StepOutputs[strconv.Itoa(i)], &o)
		for _, w := range s.Workers {
			if w.ID == o.By {
				langs[w.Lang] = true
			}
		}
	}
	if !langs["node"] || !langs["go"] || res.Meta.Attempt != 2 {
		t.Errorf("steps written by %v at attempt %d: want the Node agent's, then the Go agent's, attempt 2", langs, res.Meta.Attempt)
	}
}
