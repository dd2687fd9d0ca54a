package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/statesidecar/state/examples/prreview/review"
)

// A userError is an action refused for a reason the page shows as is.
type userError struct {
	status int
	msg    string
}

func (e *userError) Error() string { return e.msg }

func refuse(status int, format string, args ...any) error {
	return &userError{status: status, msg: fmt.Sprintf(format, args...)}
}

// Paces: how long each agent step takes, so people can follow.
var paces = map[string]time.Duration{"fast": 300 * time.Millisecond, "normal": 1200 * time.Millisecond, "slow": 5 * time.Second}

// A demo is the dashboard's state and its actions: the loaded pull
// request, the registered pipeline, the agents, and what the sidecar says.
type demo struct {
	cfg  config
	c    *mcpClient
	hub  *hub
	sup  *supervisor
	gh   review.GitHub
	id   string // the demo tag of this dashboard's runs
	exe  string // this program, to start Go agents
	node nodeAgent

	mu   sync.Mutex // serialises the lifecycle actions
	vmu  sync.Mutex // guards the fields below
	pr   *review.PR
	pipe *pipeline
	pace string
	view sidecarView
	wake chan struct{}
}

// A nodeAgent is the Node reviewer, if it can run here.
type nodeAgent struct {
	Available bool     `json:"available"`
	Kinds     []string `json:"kinds"`
	Hint      string   `json:"hint,omitempty"`
	node      string
	script    string
}

// findNodeAgent looks for node and the Node reviewer with its installed SDK.
func findNodeAgent(dir string) nodeAgent {
	na := nodeAgent{Kinds: []string{review.Style}}
	install := "npm ci --prefix examples/prreview/node"
	node, err := execLookPath("node")
	if err != nil {
		na.Hint = "Node is not installed: install Node 20 or later, then run `" + install + "` to enable the Node reviewer."
		return na
	}
	if dir == "" {
		na.Hint = "The Node reviewer (examples/prreview/node) was not found: run the demo from the repository, or pass -node-agent DIR."
		return na
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		na.Hint = "The Node reviewer's dependencies are not installed: run `npm ci --prefix " + dir + "` (the official MCP TypeScript SDK), then restart the demo."
		return na
	}
	na.Available, na.node, na.script = true, node, filepath.Join(dir, "reviewer.mjs")
	return na
}

func newDemo(cfg config, c *mcpClient, exe string) *demo {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	d := &demo{cfg: cfg, c: c, hub: newHub(), exe: exe, id: "d-" + hex.EncodeToString(b), pace: "normal",
		gh: review.GitHub{API: cfg.GitHubAPI, Token: cfg.GitHubToken}, wake: make(chan struct{}, 1),
		node: findNodeAgent(cfg.NodeDir)}
	d.sup = newSupervisor(d.hub, d.poke)
	d.sup.fencedOut = d.respawn
	return d
}

// poke asks the watcher to refresh now and the pages to redraw.
func (d *demo) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// logged is the dashboard's own client for actions: every call shows in
// the tool log as DASHBOARD.
type logged struct{ d *demo }

func (l logged) callInto(ctx context.Context, tool string, args map[string]any, out any) error {
	start := time.Now()
	raw, err := l.d.c.call(ctx, tool, args)
	e := logEntry{Source: "DASHBOARD", Level: "tool", Tool: tool, Args: shortenArgs(args),
		MS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		e.Error = err.Error()
	} else {
		e.Result = abbreviate(raw)
	}
	l.d.hub.log(e)
	if err != nil {
		return err
	}
	if out != nil {
		return jsonUnmarshal(raw, out, tool)
	}
	return nil
}

// sidecarFailure turns a failed call into what the page says.
func sidecarFailure(url string, err error) error {
	var te *toolError
	switch {
	case errors.As(err, &te):
		return refuse(http.StatusBadGateway, "The sidecar refused %s: %s", te.Tool, te.Msg)
	case errors.Is(err, errTokenRefused):
		return refuse(http.StatusServiceUnavailable, "The sidecar at %s refused the bearer token (401): set PRREVIEW_SIDECAR_TOKEN (or -sidecar-token) to one of its SIDECAR_AUTH_TOKENS.", url)
	case errors.Is(err, errUnreachable):
		return refuse(http.StatusServiceUnavailable, "The sidecar at %s does not answer (%s). Start it, or restart the demo without -sidecar to let it run its own.",
			url, strings.TrimPrefix(err.Error(), errUnreachable.Error()+": "))
	}
	return err
}

// loadPR loads a pull request: "bundled:<id>" (or a bundled id) from the
// fixtures, a GitHub URL live.
func (d *demo) loadPR(ctx context.Context, input string) (review.PR, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.pipeline(); p != nil {
		return review.PR{}, refuse(http.StatusConflict, "A workflow run (%s) is registered for the current PR: press Change PR first.", p.Parent)
	}
	input = strings.TrimSpace(input)
	var pr review.PR
	var err error
	switch id, ok := strings.CutPrefix(input, "bundled:"); {
	case ok:
		pr, err = review.Bundled(id)
		if err != nil {
			return pr, refuse(http.StatusNotFound, "There is no bundled PR %q: pick one of the bundled PRs below.", id)
		}
	default:
		if b, berr := review.Bundled(input); berr == nil {
			pr = b
			break
		}
		ref, perr := review.ParsePRURL(input)
		if perr != nil {
			return pr, refuse(http.StatusBadRequest, "%s. Or pick one of the bundled PRs below.", capitalize(perr.Error()))
		}
		d.hub.system("info", fmt.Sprintf("Fetching %s/%s#%d from GitHub...", ref.Owner, ref.Repo, ref.Number))
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		pr, err = d.gh.Fetch(fctx, ref)
		cancel()
		if err != nil {
			status := http.StatusBadGateway
			if errors.Is(err, review.ErrOffline) {
				status = http.StatusServiceUnavailable
			}
			d.hub.system("error", capitalize(err.Error()))
			return pr, refuse(status, "%s.", capitalize(err.Error()))
		}
	}
	d.vmu.Lock()
	d.pr = &pr
	d.vmu.Unlock()
	d.hub.system("info", fmt.Sprintf("PR details loaded: %q by @%s (%s, %s)", pr.Title, pr.Author, pr.Ref(), pr.Source))
	d.poke()
	return pr, nil
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func (d *demo) pipeline() *pipeline {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	return d.pipe
}

func (d *demo) currentPR() *review.PR {
	d.vmu.Lock()
	defer d.vmu.Unlock()
	return d.pr
}

// register stores the PR in the sidecar and registers the pipeline's runs.
func (d *demo) register(ctx context.Context) (pipeline, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pr := d.currentPR()
	if pr == nil {
		return pipeline{}, refuse(http.StatusConflict, "Load a pull request first: paste a GitHub PR URL or pick a bundled PR.")
	}
	if p := d.pipeline(); p != nil {
		return pipeline{}, refuse(http.StatusConflict, "A workflow run is already registered (%s): press Reset Demo to start over.", p.Parent)
	}
	d.hub.system("info", "Registering new workflow in sidecar...")
	c := logged{d}
	p, err := createPipeline(ctx, c, d.id, *pr)
	if err != nil {
		return p, sidecarFailure(d.cfg.SidecarURL, err)
	}
	if err := c.callInto(ctx, "state_set", map[string]any{"key": prKey(p.Parent), "value": pr, "agent_id": "dashboard",
		"ttl_seconds": dataTTLSeconds}, nil); err != nil {
		return p, sidecarFailure(d.cfg.SidecarURL, err)
	}
	d.vmu.Lock()
	d.pipe = &p
	d.vmu.Unlock()
	d.hub.system("info", fmt.Sprintf("Workflow run successfully registered. run_id = %s (reviews: security %s, performance %s, style %s)",
		p.Parent, p.Children[review.Security], p.Children[review.Performance], p.Children[review.Style]))
	d.poke()
	return p, nil
}

// reset stops every agent and retires the registered runs; with forgetPR
// (Change PR) it also unloads the pull request.
func (d *demo) reset(ctx context.Context, forgetPR bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.sup.stopAll(false, time.Minute); err != nil {
		return err
	}
	p := d.pipeline()
	var retireErr error
	if p != nil {
		// Children first: a join parent cannot be finished while it waits
		// for them, and failing the last one releases it.
		var ids []string
		for _, k := range review.Kinds {
			ids = append(ids, p.Children[k])
		}
		ids = append(ids, p.Parent)
		retireErr = d.retire(ctx, ids)
	}
	d.vmu.Lock()
	d.pipe = nil
	if forgetPR {
		d.pr = nil
	}
	d.view.Runs, d.view.KV, d.view.Report = nil, nil, nil
	d.vmu.Unlock()
	switch {
	case forgetPR:
		d.hub.system("info", "Demo reset: agents stopped, PR unloaded. Awaiting GitHub PR URL input...")
	default:
		d.hub.system("info", "Demo reset: agents stopped and the old runs retired. Register a new workflow to start again.")
	}
	if retireErr != nil {
		d.hub.system("warn", "The old runs could not be retired ("+retireErr.Error()+"); they stay in the sidecar, but this dashboard ignores them.")
	}
	d.poke()
	return nil
}

// retire marks unfinished runs failed, so that no agent picks them up again.
func (d *demo) retire(ctx context.Context, ids []string) error {
	c := logged{d}
	for _, id := range ids {
		var st runInfo
		if err := c.callInto(ctx, "workflow_status", map[string]any{"run_id": id}, &st); err != nil {
			return sidecarFailure(d.cfg.SidecarURL, err)
		}
		if finished(st.Status) {
			continue
		}
		if err := c.callInto(ctx, "workflow_checkpoint", map[string]any{"run_id": id, "step": st.LastStep + 1,
			"output": map[string]any{"retired_by": "Reset Demo"}, "status": "failed"}, nil); err != nil {
			return sidecarFailure(d.cfg.SidecarURL, err)
		}
	}
	return nil
}

// spawn starts count agents of kind in lang; count > 1 is a race.
func (d *demo) spawn(ctx context.Context, kind, lang string, count int) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !validKind(kind) || kind == kindAggregator {
		return nil, refuse(http.StatusBadRequest, "Unknown reviewer kind %q: security, performance or style.", kind)
	}
	if count < 1 || count > 5 {
		return nil, refuse(http.StatusBadRequest, "count must be between 1 and 5, got %d.", count)
	}
	p := d.pipeline()
	if p == nil {
		return nil, refuse(http.StatusConflict, "Register a workflow first (1. Register Workflow): there is no run for a %s agent to discover.", kindTitle(kind))
	}
	var st runInfo
	if err := d.c.callInto(ctx, "workflow_status", map[string]any{"run_id": p.Children[kind]}, &st); err != nil {
		return nil, sidecarFailure(d.cfg.SidecarURL, err)
	}
	if finished(st.Status) {
		return nil, refuse(http.StatusConflict, "The %s review (%s) is already %s: press Reset Demo to run it again.", kindTitle(kind), st.RunID, st.Status)
	}
	switch lang {
	case "", "go":
		lang = "go"
	case "node":
		if !d.node.Available {
			return nil, refuse(http.StatusConflict, "%s", d.node.Hint)
		}
		if kind != review.Style {
			return nil, refuse(http.StatusBadRequest, "The Node agent reviews style only.")
		}
	default:
		return nil, refuse(http.StatusBadRequest, "Unknown agent language %q: go or node.", lang)
	}
	var rc *race
	if count > 1 {
		rc = d.sup.newRace(fmt.Sprintf("race-%s-%d", agentPrefix[kind], time.Now().UnixMilli()%100000), kind)
		d.hub.system("event", fmt.Sprintf("Race test: starting %d %s agents behind a barrier; exactly one can win the claim on %s",
			count, kindTitle(kind), p.Children[kind]))
	}
	var ids []string
	for range count {
		id := newAgentID(kind, lang)
		raceID := ""
		if rc != nil {
			raceID = rc.ID
		}
		w, err := d.sup.start(id, kind, lang, raceID, d.agentCommand(kind, lang, id, rc != nil))
		if err != nil {
			if rc != nil {
				d.sup.releaseRace(rc.ID)
			}
			return ids, err
		}
		if rc != nil {
			d.sup.join(rc, w)
		}
		d.hub.system("info", fmt.Sprintf("Spawned %s agent %s (%s, pid %d)", kindTitle(kind), id, langName(lang), w.PID))
		ids = append(ids, id)
	}
	if rc != nil {
		// Should a racer never reach the barrier, release the others anyway.
		time.AfterFunc(time.Minute, func() { d.sup.releaseRace(rc.ID) })
	}
	d.poke()
	return ids, nil
}

func langName(lang string) string {
	if lang == "node" {
		return "Node, MCP TypeScript SDK"
	}
	return "Go, mcp-go"
}

// respawn replaces an agent that was fenced out (its claim lapsed, on a
// machine too busy for its heartbeats, and the sidecar refused its next
// write) when no other agent of its kind is alive to take the run over:
// without it the review would wait for somebody to press Spawn. A review
// already finished, or a dashboard shutting down, gets no new agent.
func (d *demo) respawn(w *worker) {
	if others := d.sup.find(func(o *worker) bool { return o.Kind == w.Kind && o.Alive }); len(others) > 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := d.spawn(ctx, w.Kind, w.Lang, 1)
	if err != nil || len(ids) == 0 {
		return
	}
	d.hub.system("warn", fmt.Sprintf("%s was fenced out and no %s agent was left to take its run over: started %s in its place",
		w.ID, kindTitle(w.Kind), ids[0]))
}

// agentCommand is the command line of one agent process.
func (d *demo) agentCommand(kind, lang, id string, barrier bool) agentCommand {
	d.vmu.Lock()
	step := paces[d.pace]
	d.vmu.Unlock()
	if kind == kindAggregator {
		step = 0
	}
	args := []string{"-kind", kind, "-sidecar", d.cfg.SidecarURL, "-id", id, "-demo", d.id,
		"-claim-ttl", d.cfg.ClaimTTL.String(), "-step-delay", step.String(), "-exit-on-stdin-eof"}
	if barrier {
		args = append(args, "-barrier")
	}
	env := []string{"PRREVIEW_SIDECAR_TOKEN=" + d.cfg.SidecarToken}
	if lang == "node" {
		return agentCommand{Path: d.node.node, Args: append([]string{d.node.script}, args...), Env: env}
	}
	return agentCommand{Path: d.exe, Args: append([]string{"agent"}, args...), Env: env}
}

// crash SIGKILLs the agent of kind that holds its run's claim.
func (d *demo) crash(ctx context.Context, kind string) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !validKind(kind) || kind == kindAggregator {
		return "", refuse(http.StatusBadRequest, "Unknown reviewer kind %q: security, performance or style.", kind)
	}
	active := d.sup.find(func(w *worker) bool { return w.Kind == kind && w.Alive && w.State == "working" })
	if len(active) == 0 {
		others := d.sup.find(func(w *worker) bool { return w.Kind == kind && w.Alive })
		if len(others) > 0 {
			return "", refuse(http.StatusConflict, "No %s agent holds the claim right now (%d standing by or starting): nothing to crash yet.", kindTitle(kind), len(others))
		}
		return "", refuse(http.StatusConflict, "No active %s agent to crash: spawn one first.", kindTitle(kind))
	}
	w := active[0]
	if err := d.sup.kill(w); err != nil {
		return "", err
	}
	d.hub.system("warn", fmt.Sprintf("Crash Active: sent SIGKILL to %s (pid %d), which held %s at step %d with fence %d. Its claim expires within %s; then a new agent can take over.",
		w.ID, w.PID, w.RunID, w.Step, w.Fence, d.cfg.ClaimTTL))
	d.poke()
	return w.ID, nil
}

// freeze stops the agent of kind that holds its review's claim (SIGSTOP),
// or, with thaw, continues the frozen one (SIGCONT). A frozen agent misses
// its heartbeats: its claim expires and another agent can take the run
// over; continued, it writes its step with its old fence, and the sidecar
// refuses the zombie's late write.
func (d *demo) freeze(ctx context.Context, kind string, thaw bool) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !validKind(kind) || kind == kindAggregator {
		return "", refuse(http.StatusBadRequest, "Unknown reviewer kind %q: security, performance or style.", kind)
	}
	var ws []*worker
	if thaw {
		ws = d.sup.find(func(w *worker) bool { return w.Kind == kind && w.Alive && w.Frozen })
		if len(ws) == 0 {
			return "", refuse(http.StatusConflict, "No frozen %s agent to thaw.", kindTitle(kind))
		}
	} else {
		ws = d.sup.find(func(w *worker) bool { return w.Kind == kind && w.Alive && w.State == "working" && !w.Frozen })
		if len(ws) == 0 {
			return "", refuse(http.StatusConflict, "No %s agent holds the claim right now: nothing to freeze.", kindTitle(kind))
		}
	}
	w := ws[0]
	if err := d.sup.freeze(w, thaw); err != nil {
		return "", err
	}
	if thaw {
		d.hub.system("warn", fmt.Sprintf("Thaw: sent SIGCONT to %s (pid %d). It still believes it holds %s with fence %d, and writes its step.",
			w.ID, w.PID, w.RunID, w.Fence))
	} else {
		d.hub.system("warn", fmt.Sprintf("Freeze: sent SIGSTOP to %s (pid %d), which holds %s with fence %d. It misses its heartbeats: its claim expires within %s, then another agent can take over.",
			w.ID, w.PID, w.RunID, w.Fence, d.cfg.ClaimTTL))
	}
	d.poke()
	return w.ID, nil
}

// aggregate starts the aggregator once every review has finished.
func (d *demo) aggregate(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pipeline()
	if p == nil {
		return "", refuse(http.StatusConflict, "Nothing to aggregate: register a workflow and run the three reviews first.")
	}
	open, _, err := reviewProgress(ctx, d.c, p.Parent)
	if err != nil {
		return "", sidecarFailure(d.cfg.SidecarURL, err)
	}
	if len(open) > 0 {
		return "", refuse(http.StatusConflict, "Aggregate Reviews needs all three reviews finished. Still open: %s.", strings.Join(open, ", "))
	}
	var st runInfo
	if err := d.c.callInto(ctx, "workflow_status", map[string]any{"run_id": p.Parent}, &st); err != nil {
		return "", sidecarFailure(d.cfg.SidecarURL, err)
	}
	if finished(st.Status) {
		return "", refuse(http.StatusConflict, "The reviews of %s are already aggregated: the report is below.", p.Parent)
	}
	if busy := d.sup.find(func(w *worker) bool { return w.Kind == kindAggregator && w.Alive }); len(busy) > 0 {
		return "", refuse(http.StatusConflict, "The aggregator %s is already running.", busy[0].ID)
	}
	id := newAgentID(kindAggregator, "go")
	w, err := d.sup.start(id, kindAggregator, "go", "", d.agentCommand(kindAggregator, "go", id, false))
	if err != nil {
		return "", err
	}
	d.hub.system("info", fmt.Sprintf("Aggregating: spawned aggregator %s (pid %d) to join the three reviews of %s", id, w.PID, p.Parent))
	d.poke()
	return id, nil
}

// setPace sets how long each step of the agents spawned next takes.
func (d *demo) setPace(p string) error {
	if _, ok := paces[p]; !ok {
		return refuse(http.StatusBadRequest, "Unknown pace %q: fast, normal or slow.", p)
	}
	d.vmu.Lock()
	d.pace = p
	d.vmu.Unlock()
	d.hub.system("info", "Pace: agents spawned from now on take "+paces[p].String()+" per step.")
	d.poke()
	return nil
}
