package uitest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/sidecar"
)

// wait bounds every wait for the page: generous, for a loaded machine. No
// test waits for it to pass: each polls for what it expects.
const wait = 45 * time.Second

// chromium finds the browser: UITEST_CHROMIUM, or Debian's package.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("UITEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("Chromium is not installed: apt-get install -y chromium (or set UITEST_CHROMIUM)")
	return ""
}

// newBrowser starts a headless Chromium for the test, with a fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 720),
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

// artifacts is the directory of the test's screenshots: UITEST_ARTIFACTS
// or screenshots/ (ignored by git), one folder per test.
func artifacts(t *testing.T) string {
	dir := os.Getenv("UITEST_ARTIFACTS")
	if dir == "" {
		dir = "screenshots"
	}
	dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A page is the browser's tab, as a person looks at it.
type page struct {
	t    *testing.T
	ctx  context.Context
	dir  string
	shot int
}

func newPage(t *testing.T) *page {
	return &page{t: t, ctx: newBrowser(t), dir: artifacts(t)}
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
	body, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ''`))
	p.t.Fatalf(format+"\n--- what the page shows ---\n%s", append(args, body)...)
}

// open loads url and waits for its document.
func (p *page) open(url string) {
	p.t.Helper()
	p.do("opening "+url, chromedp.Navigate(url))
	p.wait("the page has loaded", `document.readyState === 'complete'`)
}

// click clicks an element as a person does: a mouse click at its position,
// which fails unless the element is on screen.
func (p *page) click(sel string) {
	p.t.Helper()
	p.seen(sel)
	p.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// wait polls a JavaScript predicate until it holds.
func (p *page) wait(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr,
			chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		// A navigation (after a click on a link or a form) destroys the
		// document the poll ran in: poll again in the new one.
		if time.Now().Before(deadline) && p.ctx.Err() == nil && navigating(err) {
			time.Sleep(50 * time.Millisecond) // the poll interval
			continue
		}
		p.fail("waiting until %s: %v", what, err)
	}
}

// navigating reports whether err comes of the page navigating under a call.
func navigating(err error) bool {
	for _, m := range []string{"Cannot find context", "context was destroyed", "navigated or closed", "Not attached"} {
		if strings.Contains(err.Error(), m) {
			return true
		}
	}
	return false
}

// visibleJS is a predicate: the first element matching the selector is
// rendered and visible (computed style, ancestors included) with an area.
const visibleJS = `((sel, text) => {
	const all = [...document.querySelectorAll(sel)];
	return all.some(e => {
		if (!e.checkVisibility({opacityProperty: true, visibilityProperty: true})) return false;
		const r = e.getBoundingClientRect();
		if (r.width <= 0 || r.height <= 0) return false;
		return text === '' || e.innerText.includes(text);
	});
})`

// seen waits until an element matching sel is visible.
func (p *page) seen(sel string) { p.t.Helper(); p.seenText(sel, "") }

// seenText waits until an element matching sel is visible and its rendered
// text (innerText: what is shown) contains text.
func (p *page) seenText(sel, text string) {
	p.t.Helper()
	p.wait(fmt.Sprintf("%s shows %q", sel, text), fmt.Sprintf(`%s(%q, %q)`, visibleJS, sel, text))
}

// unseen waits until no element matching sel is visible.
func (p *page) unseen(sel string) {
	p.t.Helper()
	p.wait(sel+" is not visible", fmt.Sprintf(`!%s(%q, '')`, visibleJS, sel))
}

// text returns the rendered text of the first element matching sel.
func (p *page) text(sel string) string {
	p.t.Helper()
	s, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? ''`, sel)))
	if err != nil {
		p.fail("reading %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// screenshot saves what the window shows as NN-name.png.
func (p *page) screenshot(name string) {
	p.t.Helper()
	p.shot++
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Logf("screenshot %s: %v", name, err)
		return
	}
	file := filepath.Join(p.dir, fmt.Sprintf("%02d-%s.png", p.shot, name))
	if err := os.WriteFile(file, png, 0o644); err != nil {
		p.t.Errorf("saving %s: %v", file, err)
	}
}

// A server is a sidecar serving HTTP, its console on, for one test.
type server struct {
	URL   string
	Store *state.Store
}

// startSidecar serves a sidecar over a fresh store of backend ("sqlite" or
// "redis") on a loopback port until the test ends; tokens, if any, are its
// bearer tokens.
func startSidecar(t *testing.T, backend string, tokens ...sidecar.Token) *server {
	t.Helper()
	cfg := sidecar.Defaults()
	cfg.Port, cfg.Console, cfg.Tokens = 0, sidecar.ConsoleOn, tokens
	cfg.ShutdownTimeout = 5 * time.Second
	switch backend {
	case "sqlite":
		cfg.Backend, cfg.DBPath = sidecar.BackendSQLite, filepath.Join(t.TempDir(), "state.db")
	case "redis":
		b := storetest.New(t, "redis")
		if b.Skip != "" {
			t.Skip(b.Skip)
		}
		cfg.Backend, cfg.RedisURL = sidecar.BackendRedis, b.URL
	default:
		t.Fatalf("no backend %q", backend)
	}
	sc, err := sidecar.New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sc.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
		if err := sc.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &server{URL: "http://" + ln.Addr().String(), Store: sc.Store()}
}

// backends runs f on SQLite and on Redis.
func backends(t *testing.T, f func(t *testing.T, backend string)) {
	for _, b := range []string{"sqlite", "redis"} {
		t.Run(b, func(t *testing.T) { f(t, b) })
	}
}

// seesNothingNew checks that the page announces no change yet.
func (p *page) seesNothingNew() {
	p.t.Helper()
	p.unseen("#changes")
}
