package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/statesidecar/state/examples/prreview/review"
)

// chromium finds a Chromium to drive: PRREVIEW_CHROMIUM, or Debian's
// package on the PATH.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PRREVIEW_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium is not installed: `apt-get install -y chromium` (Debian's package) or set PRREVIEW_CHROMIUM to run the browser test")
	return ""
}

// artifacts is where the browser test saves its screenshots:
// PRREVIEW_ARTIFACTS, or testdata/artifacts (ignored by git).
func artifacts(t *testing.T) string {
	dir := os.Getenv("PRREVIEW_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A page is one browser tab on the dashboard.
type page struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	shot int
}

// newBrowser starts a headless Chromium for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	// Chromium's scratch directories (org.chromium.Chromium.*) go here, not
	// under the test's own directory: its socket path must stay short.
	scratch, err := os.MkdirTemp("", "cr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(scratch) }) // after the browser is gone (cleanups run last first)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Env("TMPDIR=" + scratch),
		chromedp.WindowSize(1480, 1000),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(func(string, ...any) {}))
	ctx, cancelTimeout := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

func (p *page) do(what string, a chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, a); err != nil {
		p.fail("%s: %v", what, err)
	}
}

func (p *page) fail(format string, args ...any) {
	p.t.Helper()
	p.screenshot("failure")
	notice, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector('#notice-text')?.textContent || ''`))
	p.t.Fatalf(format+" (notice on the page: %q)", append(args, notice)...)
}

func (p *page) open(url string) {
	p.t.Helper()
	p.do("opening "+url, chromedp.Navigate(url))
	p.wait("the page has its first snapshot", `document.body.dataset.ready === 'true' && document.querySelectorAll('#bundled-list .chip').length > 0`)
}

// click clicks an element as a user does (mouse events at its position).
func (p *page) click(sel string) {
	p.t.Helper()
	p.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// wait polls a JavaScript predicate over the page's state until it holds.
func (p *page) wait(what, expr string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(wait)))
	if err != nil {
		p.fail("waiting until %s: %v", what, err)
	}
}

// notice waits for the page's notice to contain want.
func (p *page) notice(level, want string) {
	p.t.Helper()
	p.wait(fmt.Sprintf("the page says %q", want), fmt.Sprintf(
		`(() => { const n = document.querySelector('#notice'); return !n.hidden && n.dataset.level === %q && n.textContent.includes(%q); })()`, level, want))
}

func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.textContent ?? ''`, sel)))
	if err != nil {
		p.fail("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (p *page) eval(expr string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		p.fail("evaluating %s: %v", expr, err)
	}
	return n
}

// screenshot saves the whole page as NN-name.png in the artifacts directory.
func (p *page) screenshot(name string) {
	p.t.Helper()
	p.shot++
	png, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(p.dir, fmt.Sprintf("%02d-%s.png", p.shot, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Errorf("saving %s: %v", file, err)
	}
}

// viewport saves what a window of width x height shows of the page's top.
func (p *page) viewport(name string, width, height int64) {
	p.t.Helper()
	p.do("scrolling to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	p.do("resizing the viewport", chromedp.EmulateViewport(width, height))
	defer p.do("restoring the viewport", chromedp.ResetViewport())
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(p.dir, name+".png"), png, 0o644); err != nil {
		p.t.Errorf("saving %s: %v", name, err)
	}
}

// The story of the talk's demo, played through the page in a real browser:
// buttons out of order, a malformed URL, a bundled PR, register, a review, a
// race with exactly one winner, a crash and a takeover at attempt 2, and the
// aggregated report. Screenshots of each step go to the artifacts directory.
func TestBrowserStory(t *testing.T) {
	ctx := newBrowser(t)
	h := startDemo(t)
	p := &page{t: t, ctx: ctx, dir: filepath.Join(artifacts(t), "story")}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.open(h.URL)
	p.wait("the sidecar is connected", `document.querySelector('#sidecar').dataset.healthy === 'true'`)
	if got := p.text("#run-id"); got != "No Active Run" {
		t.Errorf("run id before registering: %q", got)
	}

	// Out of order, and a malformed URL: clear messages, nothing breaks.
	p.click("#register")
	p.notice("error", "Load a pull request first")
	p.click(`.agent[data-kind="security"] .spawn`)
	p.notice("error", "Register a workflow first")
	p.do("typing a malformed URL", chromedp.SetValue(chromedp.CSS("#pr-input"), "https://github.com/acme/tools/issues/3"))
	p.click("#load-pr")
	p.notice("error", "Not a GitHub pull-request URL")
	p.screenshot("malformed-url")

	// Load the talk's PR and register the workflow.
	p.click(fmt.Sprintf(`#bundled-list .chip[data-id=%q]`, review.TalkPR))
	p.wait("the PR is shown", `document.querySelector('#pr-title').textContent === 'fix: correct MCPServer call_tool result type'`)
	if a, b := p.text("#pr-author"), p.text("#pr-branch"); a != "@fengjikui" || b != "fix-mcpserver-call-tool-result-shapes" {
		t.Errorf("author %q, branch %q", a, b)
	}
	p.click("#register")
	p.wait("a run id is shown", `/^wf-[0-9a-f]{12}$/.test(document.querySelector('#run-id').textContent)`)
	p.wait("the runs are shown", `document.querySelectorAll('#runs tr[data-run]').length === 4`)
	p.screenshot("registered")

	// Style: one agent (the Node one when it is installed) reviews the PR.
	p.click(`#pace button[data-pace="fast"]`)
	p.wait("the pace is fast", `document.querySelector('#pace button[data-pace="fast"]').classList.contains('on')`)
	nodeOK := p.eval(`S.node.available ? 1 : 0`) == 1
	if nodeOK {
		p.click(`.agent[data-kind="style"] .lang button[data-lang="node"]`)
	} else {
		t.Log("the Node reviewer is not installed (npm ci --prefix examples/prreview/node): the style agent is the Go one")
	}
	p.click(`.agent[data-kind="style"] .spawn`)
	p.wait("the style review is done", `document.querySelector('.agent[data-kind="style"] .review-status').textContent === 'done'`)
	if nodeOK {
		p.wait("the style review was done by the Node agent", `S.workers.some((w) => w.kind === 'style' && w.lang === 'node' && w.state === 'done')`)
	}

	// Performance: Spawn 3, exactly one winner, the losers' reasons shown.
	p.click(`.agent[data-kind="performance"] .spawn3`)
	p.wait("the race is settled", `(() => {
		const items = [...document.querySelectorAll('.agent[data-kind="performance"] .race li')];
		return items.length === 3 && items.every((li) => ['won', 'lost'].includes(li.dataset.outcome));
	})()`)
	won := p.eval(`document.querySelectorAll('.agent[data-kind="performance"] .race li[data-outcome="won"]').length`)
	lost := p.eval(`[...document.querySelectorAll('.agent[data-kind="performance"] .race li[data-outcome="lost"]')].filter((li) => li.textContent.includes("Workflow is in status")).length`)
	if won != 1 || lost != 2 {
		t.Fatalf("race: %d winners and %d losers with a reason shown, want 1 and 2", won, lost)
	}
	p.wait("the race title says so", `document.querySelector('.agent[data-kind="performance"] .race-title').textContent.includes('exactly one winner')`)
	p.screenshot("race")

	// Security: slow steps, crash the active agent, take over at attempt 2.
	p.click(`#pace button[data-pace="slow"]`)
	p.wait("the pace is slow", `document.querySelector('#pace button[data-pace="slow"]').classList.contains('on')`)
	p.click(`.agent[data-kind="security"] .spawn`)
	p.wait("the security agent is working after a checkpoint", `S.workers.some((w) => w.kind === 'security' && w.state === 'working' && w.step >= 1)`)
	p.wait("the board shows its claim expiring", `!!document.querySelector('#board tr[data-kind="security"][data-state="working"] .expiry')`)
	p.screenshot("security-working")
	p.click(`.agent[data-kind="security"] .crash`)
	p.wait("the board shows the crash", `!!document.querySelector('#board tr[data-kind="security"][data-state="crashed"]')`)
	p.screenshot("crashed")
	if p.text(`.agent[data-kind="security"] .review-status`) == "done" {
		t.Fatal("the security review finished before the crash")
	}
	p.click(`#pace button[data-pace="fast"]`)
	p.wait("the pace is fast", `document.querySelector('#pace button[data-pace="fast"]').classList.contains('on')`)
	p.click(`.agent[data-kind="security"] .spawn`)
	p.wait("the board shows attempt 2", `!!document.querySelector('#board tr[data-kind="security"][data-attempt="2"]')`)
	p.wait("attempt 2 has a higher fence", `(() => {
		const rows = [...document.querySelectorAll('#board tr[data-kind="security"]')];
		const crashed = rows.find((r) => r.dataset.state === 'crashed'), second = rows.find((r) => r.dataset.attempt === '2');
		return crashed && second && Number(second.dataset.fence) > Number(crashed.dataset.fence);
	})()`)
	p.wait("the security review is done", `document.querySelector('.agent[data-kind="security"] .review-status').textContent === 'done'`)
	p.screenshot("takeover")
	p.viewport("readme", 1480, 1400) // the README's picture (docs/prreview.png)

	// Aggregate: one combined report.
	p.wait("the performance review is done", `document.querySelector('.agent[data-kind="performance"] .review-status').textContent === 'done'`)
	p.click("#aggregate")
	p.wait("the report is shown", `!document.querySelector('#report-card').hidden && document.querySelectorAll('#report .report-section').length === 3`)
	if v := p.text("#report .verdict .v"); v != "changes requested" {
		t.Errorf("verdict %q", v)
	}
	p.wait("the review run is done", `document.querySelector('#run-status').textContent === 'done'`)
	p.do("scrolling to the top", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
	p.screenshot("report")

	// Pressing a button of a finished demo is refused, clearly.
	p.click(`.agent[data-kind="style"] .spawn`)
	p.notice("error", "already done")
	t.Logf("screenshots in %s", p.dir)
}

// With the sidecar down the page says so, and Register says why it failed.
func TestBrowserSidecarDown(t *testing.T) {
	ctx := newBrowser(t)
	down := deadURL(t)
	h := startDemo(t, "-sidecar", down)
	p := &page{t: t, ctx: ctx, dir: filepath.Join(artifacts(t), "sidecar-down")}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.open(h.URL)
	p.wait("the header shows the sidecar is down", `document.querySelector('#sidecar').dataset.healthy === 'false'`)
	p.click(fmt.Sprintf(`#bundled-list .chip[data-id=%q]`, review.TalkPR))
	p.wait("the PR is shown", `document.querySelector('#pr-title').textContent.startsWith('fix: correct MCPServer')`)
	p.click("#register")
	p.notice("error", "does not answer (connection refused")
	p.screenshot("register-refused")
}
