package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/statesidecar/state/examples/prreview/review"
)

// The whole story through the dashboard's API, with real agent processes
// and a real sidecar: a race with exactly one winner, a crash and a
// takeover that resumes from the last checkpoint, and the aggregation.
//
// Nothing here depends on the machine's speed: the claim TTL is long enough
// that a starved agent keeps its claim, and should one still lapse, the
// dashboard starts a new agent in its place (respawn), which the checks on
// the takeover allow for.
func TestStory(t *testing.T) {
	h := startDemo(t, "-claim-ttl", "10s")
	h.ok(t, "pr", map[string]string{"input": "bundled:" + review.TalkPR})
	reg := h.ok(t, "register", nil)
	parent, _ := reg["run_id"].(string)
	if !strings.HasPrefix(parent, "wf-") {
		t.Fatalf("register answered %v", reg)
	}
	h.ok(t, "pace", map[string]string{"pace": "fast"})

	// Style: one agent does the whole review.
	h.ok(t, "spawn", map[string]any{"kind": "style"})

	// Performance: three agents race for the run behind a barrier.
	h.ok(t, "spawn", map[string]any{"kind": "performance", "count": 3})
	s := h.waitState(t, "the race is settled", func(s snapshot) bool {
		if len(s.Races) != 1 {
			return false
		}
		for _, m := range s.Races[0].Members {
			if m.Outcome != "won" && m.Outcome != "lost" {
				return false
			}
		}
		return len(s.Races[0].Members) == 3
	})
	race := s.Races[0]
	winners := 0
	for _, m := range race.Members {
		switch m.Outcome {
		case "won":
			winners++
		case "lost":
			if want := "(agent: " + race.Winner + ")"; !strings.Contains(m.Reason, "Workflow is in status") || !strings.Contains(m.Reason, want) {
				t.Errorf("loser %s's reason %q should name the winner %s", m.ID, m.Reason, race.Winner)
			}
		}
	}
	if winners != 1 || race.Winner == "" {
		t.Fatalf("race %+v: want exactly one winner", race)
	}
	// Every racer had discovered the run while it was still claimable
	// before any of them claimed: the claims really competed.
	logs := h.logs(t)
	firstClaim := -1
	ready := 0
	for i, e := range logs {
		if !inRace(race, e.Source) {
			continue
		}
		if e.Event == "ready" && strings.Contains(e.Text, "discovered 1 claimable") {
			ready++
			if firstClaim >= 0 {
				t.Errorf("%s reached the barrier after a claim", e.Source)
			}
		}
		if e.Tool == "workflow_claim" && firstClaim < 0 {
			firstClaim = i
		}
	}
	if ready != 3 || firstClaim < 0 {
		t.Errorf("%d racers at the barrier having found the run claimable, first claim at %d; want 3 before any claim", ready, firstClaim)
	}

	// Security: slow steps, a crash mid-run, a takeover.
	h.ok(t, "pace", map[string]string{"pace": "slow"})
	h.ok(t, "spawn", map[string]any{"kind": "security"})
	s = h.waitState(t, "the security agent has checkpointed a step", func(s snapshot) bool {
		ws := s.workersOf("security")
		return len(ws) == 1 && ws[0].State == "working" && ws[0].Step >= 1
	})
	first := s.workersOf("security")[0]
	h.ok(t, "crash", map[string]string{"kind": "security"})
	s = h.waitState(t, "the security agent is gone", func(s snapshot) bool {
		w := s.workersOf("security")[0]
		return !w.Alive
	})
	if w := s.workersOf("security")[0]; w.State != "crashed" || !w.Killed {
		t.Fatalf("the killed agent is %q (killed %v), want crashed: it finished before the crash?", w.State, w.Killed)
	}
	if st := s.reviewStatus("security"); st == "done" {
		t.Fatal("the security review finished before the crash")
	}
	h.ok(t, "pace", map[string]string{"pace": "fast"})
	h.ok(t, "spawn", map[string]any{"kind": "security"})
	s = h.waitState(t, "a new agent finished the security review", func(s snapshot) bool { return s.reviewStatus("security") == "done" })
	// The successor that finished: the one spawned above, or (had its
	// claim lapsed on a starved machine) one the dashboard respawned.
	var second worker
	for _, w := range s.workersOf("security") {
		if w.ID != first.ID && w.State == "done" {
			second = w
		}
	}
	if second.Attempt < 2 || second.Fence <= first.Fence {
		t.Errorf("successor %+v: want attempt 2 or later, a fence above %d, done", second, first.Fence)
	}
	// The run's outputs: the crashed agent's steps, then the successor's,
	// each step written once, by one of them.
	c, _ := newMCPClient(s.Sidecar.URL, "", "test")
	defer c.Close()
	var res resumeResult
	if err := c.callInto(context.Background(), "workflow_resume", map[string]any{"run_id": s.Pipeline.Children["security"]}, &res); err != nil {
		t.Fatal(err)
	}
	var by []string
	for i := 1; i <= int(res.LastStep); i++ {
		var o stepOutput
		if err := json.Unmarshal(res.StepOutputs[strconv.Itoa(i)], &o); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		by = append(by, o.By)
	}
	switched := false
	for i, b := range by {
		switch {
		case b == first.ID && !switched:
		case b != first.ID && b != "":
			switched = true
		default:
			t.Errorf("step %d by %s: want the crashed agent's steps, then only its successors' (%v)", i+1, b, by)
		}
	}
	if by[0] != first.ID || !switched || by[len(by)-1] != second.ID || res.Meta.Attempt != second.Attempt {
		t.Errorf("steps by %v, attempt %d: want steps by %s then its successors', the last by %s (attempt %d)",
			by, res.Meta.Attempt, first.ID, second.ID, second.Attempt)
	}

	// Aggregate once all three are done.
	h.waitState(t, "every review is done", func(s snapshot) bool {
		return s.reviewStatus("style") == "done" && s.reviewStatus("performance") == "done" && s.reviewStatus("security") == "done"
	})
	h.ok(t, "aggregate", nil)
	s = h.waitState(t, "the report is in the store", func(s snapshot) bool { return len(s.Report) > 0 && string(s.Report) != "null" })
	var rep report
	if err := json.Unmarshal(s.Report, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != "changes requested" || len(rep.Reviews) != 3 || rep.PR.Title != "fix: correct MCPServer call_tool result type" {
		t.Errorf("report: %+v", rep)
	}
	for _, sec := range rep.Reviews {
		if sec.Status != "done" || sec.Agent == "" || len(sec.Findings) == 0 {
			t.Errorf("report section %+v", sec)
		}
	}
	h.waitState(t, "the review run is done", func(s snapshot) bool {
		r, _ := s.run(s.Pipeline.Parent)
		return r.Status == "done"
	})
	// The shared comment thread, written under the lease: one entry per kind.
	var thread getResult
	if err := c.callInto(context.Background(), "state_get", map[string]any{"key": commentsKey(parent)}, &thread); err != nil {
		t.Fatal(err)
	}
	var comments []comment
	_ = json.Unmarshal(thread.Value, &comments)
	if len(comments) != 3 {
		t.Errorf("comment thread %s: want one comment per kind", thread.Value)
	}
	h.refused(t, "aggregate", nil, http.StatusConflict, "already aggregated")
	h.refused(t, "spawn", map[string]any{"kind": "style"}, http.StatusConflict, "already done")
}

func inRace(r raceView, id string) bool {
	for _, m := range r.Members {
		if m.ID == id {
			return true
		}
	}
	return false
}

// logs reads the kept log from the event stream's first "logs" event.
func (h *harness) logs(t *testing.T) []logEntry {
	t.Helper()
	res, err := http.Get(h.URL + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "logs" {
			var out []logEntry
			if err := json.Unmarshal([]byte(d), &out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatal("no logs event")
	return nil
}

// Buttons pressed out of order and bad input get a clear message, and
// change nothing.
func TestOutOfOrderAndBadInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	offline := "http://" + ln.Addr().String()
	ln.Close() // a GitHub that cannot be reached
	h := startDemo(t, "-github-api", offline)

	h.refused(t, "register", nil, http.StatusConflict, "Load a pull request first")
	h.refused(t, "spawn", map[string]any{"kind": "security"}, http.StatusConflict, "Register a workflow first")
	h.refused(t, "crash", map[string]any{"kind": "security"}, http.StatusConflict, "No active Security agent")
	h.refused(t, "aggregate", nil, http.StatusConflict, "Nothing to aggregate")
	h.refused(t, "pr", map[string]string{"input": "https://github.com/acme/tools/issues/3"}, http.StatusBadRequest, "Not a GitHub pull-request URL")
	h.refused(t, "pr", map[string]string{"input": "nope"}, http.StatusBadRequest, "Not a GitHub pull-request URL")
	h.refused(t, "pr", map[string]string{"input": "bundled:nope"}, http.StatusNotFound, "no bundled PR")
	h.refused(t, "pr", map[string]string{"input": "https://github.com/acme/tools/pull/3"}, http.StatusServiceUnavailable,
		"only the bundled pull requests are available")
	h.refused(t, "pace", map[string]string{"pace": "warp"}, http.StatusBadRequest, "Unknown pace")
	if s := h.state(t); s.PR != nil || s.Pipeline != nil {
		t.Fatalf("refused actions changed the demo: %+v", s)
	}

	h.ok(t, "pr", map[string]string{"input": "go-user-search"}) // a bare bundled id works too
	h.refused(t, "aggregate", nil, http.StatusConflict, "Nothing to aggregate")
	h.ok(t, "register", nil)
	h.refused(t, "register", nil, http.StatusConflict, "already registered")
	h.refused(t, "pr", map[string]string{"input": "bundled:" + review.TalkPR}, http.StatusConflict, "press Change PR first")
	h.refused(t, "aggregate", nil, http.StatusConflict, "Still open: Security (not started), Performance (not started), Style (not started)")
	h.refused(t, "spawn", map[string]any{"kind": "grammar"}, http.StatusBadRequest, "Unknown reviewer kind")
	h.refused(t, "spawn", map[string]any{"kind": "style", "count": 9}, http.StatusBadRequest, "count must be between 1 and 5")
	h.refused(t, "spawn", map[string]any{"kind": "style", "lang": "rust"}, http.StatusBadRequest, "Unknown agent language")

	// Not JSON, or not a JSON body: refused before anything runs.
	res, err := http.Post(h.URL+"/api/register", "application/x-www-form-urlencoded", strings.NewReader("a=b"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a form post: %d", res.StatusCode)
	}
	res, err = http.Post(h.URL+"/api/spawn", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("a broken body: %d", res.StatusCode)
	}

	// Change PR: the run is retired, the PR unloaded, a new one can be loaded.
	old := h.state(t).Pipeline.Parent
	h.ok(t, "change-pr", nil)
	s := h.state(t)
	if s.PR != nil || s.Pipeline != nil || len(s.Workers) != 0 {
		t.Fatalf("after Change PR: %+v", s)
	}
	c, _ := newMCPClient(s.Sidecar.URL, "", "test")
	defer c.Close()
	var st runInfo
	if err := c.callInto(context.Background(), "workflow_status", map[string]any{"run_id": old}, &st); err != nil || st.Status != "failed" {
		t.Errorf("the old run after Change PR: %+v, %v; want failed", st, err)
	}
	h.ok(t, "pr", map[string]string{"input": "bundled:docs-claim-ttl"})
	h.ok(t, "register", nil)
}

// With the sidecar down, the page says so and actions that need it are
// refused with the reason; nothing crashes.
func TestSidecarDown(t *testing.T) {
	down := deadURL(t)
	h := startDemo(t, "-sidecar", down)
	s := h.waitState(t, "the page knows the sidecar is down", func(s snapshot) bool { return s.Sidecar.Error != "" })
	if s.Sidecar.Healthy || !strings.Contains(s.Sidecar.Error, "does not answer (connection refused") || s.Sidecar.Own {
		t.Errorf("sidecar: %+v", s.Sidecar)
	}
	h.ok(t, "pr", map[string]string{"input": "bundled:" + review.TalkPR}) // loading a bundled PR needs no sidecar
	h.refused(t, "register", nil, http.StatusServiceUnavailable, "The sidecar at "+down+" does not answer (connection refused")
	if s := h.state(t); s.Pipeline != nil {
		t.Errorf("a failed register left a pipeline: %+v", s.Pipeline)
	}
}

// A sidecar of its own, behind a bearer token mapped to a namespace: the
// dashboard and its agents (token from the environment) work in it; a
// wrong token is reported clearly.
func TestExternalSidecarWithToken(t *testing.T) {
	sc, err := startSidecar(context.Background(), t.TempDir(), 0, "s3cret:team-a", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.stop()

	h := startDemoEnv(t, map[string]string{"PRREVIEW_SIDECAR": sc.URL + "/mcp", "PRREVIEW_SIDECAR_TOKEN": "s3cret"})
	s := h.waitState(t, "the sidecar is connected", func(s snapshot) bool { return s.Sidecar.Healthy })
	if s.Sidecar.Own || s.Sidecar.URL != sc.URL {
		t.Errorf("sidecar %+v: want %s, not the demo's own", s.Sidecar, sc.URL)
	}
	h.ok(t, "pr", map[string]string{"input": "bundled:ts-deploy-notify"})
	h.ok(t, "register", nil)
	h.ok(t, "pace", map[string]string{"pace": "fast"})
	h.ok(t, "spawn", map[string]any{"kind": "security"})
	h.waitState(t, "the security review is done", func(s snapshot) bool { return s.reviewStatus("security") == "done" })

	bad := startDemoEnv(t, map[string]string{"PRREVIEW_SIDECAR": sc.URL, "PRREVIEW_SIDECAR_TOKEN": "wrong"})
	s = bad.waitState(t, "the page knows the token is refused", func(s snapshot) bool { return s.Sidecar.Error != "" })
	if !strings.Contains(s.Sidecar.Error, "refused the bearer token (401)") {
		t.Errorf("with a wrong token: %q", s.Sidecar.Error)
	}
}
