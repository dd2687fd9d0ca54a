package main

// The demo on a projector: each defect a person saw when the demo was
// shown at 1280×720 (issue 25, item 3), checked as a person sees it, by
// computed visibility and rendered text, not by attributes.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/examples/prreview/review"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/sidecar"
)

// projector opens the dashboard in a 1280×720 window, the projector's size.
func projector(t *testing.T, url string) *page {
	t.Helper()
	ctx := newBrowser(t)
	p := &page{t: t, ctx: ctx, dir: filepath.Join(artifacts(t), "projector-"+strings.ToLower(strings.TrimPrefix(t.Name(), "TestProjector")))}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p.do("sizing the window like a projector", chromedp.EmulateViewport(1280, 720))
	p.open(url)
	return p
}

// shownJS is a predicate: some element matching the selector is rendered,
// visible (computed style, ancestors included) and has an area; with a
// text, its rendered text contains it.
const shownJS = `((sel, text) => [...document.querySelectorAll(sel)].some((e) => {
	if (!e.checkVisibility({opacityProperty: true, visibilityProperty: true})) return false;
	const r = e.getBoundingClientRect();
	return r.width > 0 && r.height > 0 && (text === '' || e.innerText.toLowerCase().includes(text.toLowerCase()));
}))`

// sees waits until an element matching sel is visible showing text.
func (p *page) sees(sel, text string) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%s shows %q", sel, text), fmt.Sprintf(`%s(%q, %q)`, shownJS, sel, text))
}

// seesNo waits until no element matching sel is visible.
func (p *page) seesNo(sel string) {
	p.t.Helper()
	p.wait(sel+" is not visible", fmt.Sprintf(`!%s(%q, '')`, shownJS, sel))
}

// shown returns the rendered text of the first element matching sel.
func (p *page) shown(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ''`, sel)))
	if err != nil {
		p.fail("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// register loads the talk's PR and registers the workflow.
func (p *page) register() {
	p.t.Helper()
	p.click(fmt.Sprintf(`#bundled-list .chip[data-id=%q]`, review.TalkPR))
	p.wait("the PR is shown", `document.querySelector('#pr-title').textContent.startsWith('fix: correct MCPServer')`)
	p.click("#register")
	p.wait("the runs are known", `S.pipeline && (S.runs || []).length === 4`)
}

// pace sets the agents' pace.
func (p *page) pace(pace string) {
	p.t.Helper()
	p.click(fmt.Sprintf(`#pace button[data-pace=%q]`, pace))
	p.wait("the pace is "+pace, fmt.Sprintf(`S.pace === %q`, pace))
}

// Defect: an empty notice bar that could not be closed (.notice{display:flex}
// overrode the hidden attribute, and the old test checked the attribute).
func TestProjectorNoticeHiddenAndDismissible(t *testing.T) {
	h := startDemo(t)
	p := projector(t, h.URL)
	p.seesNo("#notice")
	p.click("#register") // no PR loaded: an error notice
	p.sees("#notice", "Load a pull request first")
	p.click("#notice-close")
	p.seesNo("#notice")
	p.screenshot("dismissed")
}

// Defect: at 1280×720 the board and the log were not on screen with the
// buttons. The presenter layout puts the controls, the three agents, the
// workers board and the events-first log in the window, without scrolling.
func TestProjectorLayoutFits1280x720(t *testing.T) {
	h := startDemo(t)
	p := projector(t, h.URL)
	p.register()
	p.click(`.agent[data-kind="style"] .spawn`)
	p.wait("the board has a row", `document.querySelectorAll('#board tr[data-agent]').length > 0`)
	for _, sel := range []string{"#register", "#reset", "#aggregate", "#pace", "#run-id",
		`.agent[data-kind="security"] .spawn`, `.agent[data-kind="performance"] .spawn3`, `.agent[data-kind="style"] .crash`,
		`.agent[data-kind="style"] .freeze`, "#board tr[data-agent]", "#log", "#log-filter"} {
		p.sees(sel, "")
		p.wait(sel+" lies inside the 1280×720 window", fmt.Sprintf(`(() => {
			const r = document.querySelector(%q).getBoundingClientRect();
			return r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;
		})()`, sel))
	}
	p.wait("the page does not scroll", `document.documentElement.scrollHeight <= window.innerHeight + 1`)
	p.wait("the log shows events first", `document.querySelector('#log-filter button.on').dataset.filter === 'event'`)
	p.sees("#log .l", "")
	p.screenshot("layout")
}

// Defects, in one telling of the story at 1280×720: Spawn 3 on a held or
// finished run (it read "0 winners"), a crash that looked like nothing
// happened, "created" for a released join parent, a log of raw JSON with
// epoch floats and broken identifiers, findings without their author.
func TestProjectorCrashTakeoverAndReport(t *testing.T) {
	h := startDemo(t)
	p := projector(t, h.URL)
	p.register()

	// Style: done; Spawn 3 then says the review is finished, and is off.
	p.pace("fast")
	p.click(`.agent[data-kind="style"] .spawn`)
	p.wait("the style review is done", `document.querySelector('.agent[data-kind="style"] .review-status').textContent === 'done'`)
	p.sees(`.agent[data-kind="style"] .spawn3`, "review finished")
	p.wait("Spawn 3 is disabled on a finished run", `document.querySelector('.agent[data-kind="style"] .spawn3').disabled`)

	// Security, slowly: while held, Spawn 3 says by whom, and is off.
	p.pace("slow")
	p.click(`.agent[data-kind="security"] .spawn`)
	p.wait("the security agent is working after a checkpoint", `S.workers.some((w) => w.kind === 'security' && w.state === 'working' && w.step >= 1)`)
	p.sees(`.agent[data-kind="security"] .spawn3`, "held by sec-")
	p.wait("the holder heartbeats", `document.querySelectorAll('#log .l.heartbeat').length > 0`)
	p.wait("Spawn 3 is disabled on a held run", `document.querySelector('.agent[data-kind="security"] .spawn3').disabled`)
	p.screenshot("held")

	// Crash: the holder is marked dead, its claim's time left shrinks and
	// runs out.
	p.click(`.agent[data-kind="security"] .crash`)
	p.sees(`.agent[data-kind="security"] .review-line .dead`, "dead")
	p.sees(`#board tr[data-state="crashed"]`, "dead holder")
	first := p.shown(`.agent[data-kind="security"] .claim-left`)
	p.wait("the claim's time left shrinks", fmt.Sprintf(`(() => {
		const t = document.querySelector('.agent[data-kind="security"] .claim-left').innerText;
		return t !== %q;
	})()`, first))
	p.screenshot("crashed")
	p.sees(`.agent[data-kind="security"] .claim-left`, "expired")
	p.wait("Spawn 3 is free again once the claim expired", `!document.querySelector('.agent[data-kind="security"] .spawn3').disabled`)

	// Takeover: flashed with the checkpoint it resumed from.
	p.pace("fast")
	p.click(`.agent[data-kind="security"] .spawn`)
	p.sees(`.agent[data-kind="security"] .takeover`, "at attempt 2: resumed from checkpoint")
	p.screenshot("takeover")
	p.wait("the security review is done", `document.querySelector('.agent[data-kind="security"] .review-status').textContent === 'done'`)

	// Performance, then the review run: "ready to aggregate", not "created".
	p.click(`.agent[data-kind="performance"] .spawn`)
	p.wait("the performance review is done", `document.querySelector('.agent[data-kind="performance"] .review-status').textContent === 'done'`)
	p.sees("#run-status", "ready to aggregate")
	if got := p.shown("#run-status"); strings.EqualFold(got, "created") {
		t.Errorf("the released review run reads %q", got)
	}

	// The log, as people read it.
	p.click(`#log-filter button[data-filter="all"]`)
	p.sees("#log .l .beat-label", "heartbeat")
	p.sees("#log .l .t", "ago")
	p.seesNo("#log .l details pre") // JSON collapsed
	lines := p.eval(`[...document.querySelectorAll('#log .l')].filter((l) => !l.hidden).length`)
	if lines < 10 {
		t.Errorf("only %d log lines shown", lines)
	}
	if n := p.eval(`[...document.querySelectorAll('#log .l')].filter((l) => !l.hidden && l.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(l).lineHeight)).length`); n != 0 {
		t.Errorf("%d log entries take more than one line", n)
	}
	if n := p.eval(`[...document.querySelectorAll('#log .l .id')].filter((e) => new Set([...e.getClientRects()].map((r) => Math.round(r.top))).size > 1).length`); n != 0 {
		bad, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#log .l .id')].filter((e) => new Set([...e.getClientRects()].map((r) => Math.round(r.top))).size > 1).slice(0, 3).map((e) => e.parentElement.outerHTML + ' ' + JSON.stringify([...e.getClientRects()])).join('\n')`))
		t.Errorf("%d identifiers are broken across lines:\n%s", n, bad)
	}
	shownLog := p.shown("#log")
	if m := regexp.MustCompile(`\b1\d{9}\.\d+`).FindString(shownLog); m != "" {
		t.Errorf("the log shows an epoch float: %s", m)
	}
	if strings.Contains(shownLog, `{"`) {
		t.Error("the log shows raw JSON before a click")
	}
	p.click(`#log .l:not([hidden]) details summary`)
	p.sees("#log .l details pre", "")
	p.screenshot("log")

	// Aggregate: every finding credited to its agent and attempt.
	p.click("#aggregate")
	p.wait("the report is shown", `document.querySelectorAll('#report .report-section').length === 3`)
	p.sees("#report .findings li .credit", "found by")
	if n := p.eval(`[...document.querySelectorAll('#report .findings li')].filter((li) => !/found by \S+, attempt \d+/.test(li.innerText)).length`); n != 0 {
		t.Errorf("%d findings are not credited to an agent and attempt", n)
	}
	p.screenshot("report")
}

// Defect: no way to show a zombie. Freeze stops the holder (SIGSTOP);
// another agent takes the run over; Thaw continues the zombie (SIGCONT),
// whose late write its fence gets refused, on screen.
func TestProjectorFreezeShowsZombieRefused(t *testing.T) {
	h := startDemo(t)
	p := projector(t, h.URL)
	p.register()
	p.pace("slow")
	p.click(`.agent[data-kind="security"] .spawn`)
	p.wait("the security agent is working after a checkpoint", `S.workers.some((w) => w.kind === 'security' && w.state === 'working' && w.step >= 1)`)
	p.click(`.agent[data-kind="security"] .freeze`)
	p.sees(`#board tr.frozen`, "frozen (SIGSTOP)")
	p.sees(`.agent[data-kind="security"] .review-line .frozen-mark`, "frozen")
	p.sees(`.agent[data-kind="security"] .freeze`, "Thaw sec-")
	p.pace("fast")
	p.click(`.agent[data-kind="security"] .spawn`)
	p.wait("another agent took the run over", `S.workers.some((w) => w.kind === 'security' && w.attempt === 2)`)
	p.screenshot("frozen-taken-over")
	p.click(`.agent[data-kind="security"] .freeze`) // Thaw
	p.sees(`.agent[data-kind="security"] .zombie`, "late write was refused by its fence")
	p.sees(`#board tr[data-state="fenced out"]`, "zombie")
	p.screenshot("zombie-refused")
}

// Defect: 16-digit versions and fences on Redis. They show as their last
// six digits, the whole number on hover.
func TestProjectorShortNumbersOnRedis(t *testing.T) {
	b := storetest.New(t, "redis")
	if b.Skip != "" {
		t.Skip(b.Skip)
	}
	cfg := sidecar.Defaults()
	cfg.Backend, cfg.RedisURL, cfg.Port, cfg.ShutdownTimeout = sidecar.BackendRedis, b.URL, 0, 5*time.Second
	sc, err := loopback.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sc.Stop() })
	h := startDemo(t, "-sidecar", sc.URL)
	p := projector(t, h.URL)
	p.register()
	p.pace("fast")
	p.click(`.agent[data-kind="style"] .spawn`)
	p.wait("the style review is done", `document.querySelector('.agent[data-kind="style"] .review-status').textContent === 'done'`)
	p.wait("the versions are large numbers", `S.kv.some((e) => String(e.version).length > 7)`)
	p.click(`#log-filter button[data-filter="all"]`)
	p.sees("#log .l .num", "…")
	check := func(where string) {
		t.Helper()
		if n := p.eval(fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((e) => e.checkVisibility() && (!/^…\d{6}$/.test(e.innerText) || e.title.length <= 7)).length`, where)); n != 0 {
			t.Errorf("%s: %d large numbers are not shown short with the whole in the title", where, n)
		}
		if m := regexp.MustCompile(`\d{10,}`).FindString(p.shown(strings.Fields(where)[0])); m != "" {
			t.Errorf("%s shows %s whole", where, m)
		}
	}
	check("#log .num")
	p.screenshot("short-numbers-log")
	p.click("#presenter") // the full layout, with the store's keys
	p.sees("#kv .num", "…")
	check("#kv .num")
	p.screenshot("short-numbers-kv")
}
