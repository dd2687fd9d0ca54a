package sidecar

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/statesidecar/state/console"
)

// TestConsoleIsOnForLoopbackOnlyByDefault checks SIDECAR_CONSOLE auto: on
// for a loopback address, off for any other unless set to true.
func TestConsoleIsOnForLoopbackOnlyByDefault(t *testing.T) {
	for _, tc := range []struct {
		host string
		mode ConsoleMode
		want bool
	}{
		{"127.0.0.1", "", true}, {"localhost", ConsoleAuto, true}, {"::1", "", true},
		{"0.0.0.0", "", false}, {"10.1.2.3", ConsoleAuto, false}, {"0.0.0.0", ConsoleOn, true},
		{"127.0.0.1", ConsoleOff, false},
	} {
		c := Defaults()
		c.Host, c.Console = tc.host, tc.mode
		if got := c.ConsoleEnabled(); got != tc.want {
			t.Errorf("host %s, console %q: enabled %v, want %v", tc.host, tc.mode, got, tc.want)
		}
	}
	c := Defaults()
	if _, err := Load([]string{"-console", "maybe"}, env(), io.Discard); err == nil {
		t.Error("-console maybe was accepted")
	}
	c.Transport = TransportStdio
	if c.ConsoleEnabled() {
		t.Error("a stdio sidecar serves no console")
	}

	off := memConfig()
	off.Console = ConsoleOff
	r := startHTTP(t, off)
	if code, _ := get(t, r.URL+"/ui/runs"); code != http.StatusNotFound {
		t.Errorf("console off: /ui/runs answered %d, want 404", code)
	}
}

// TestConsoleWithoutTokensAnswersLoopbackHostsOnly refuses a Host that is
// not loopback (DNS rebinding) and a cross-site POST.
func TestConsoleWithoutTokensAnswersLoopbackHostsOnly(t *testing.T) {
	r := startHTTP(t, memConfig())
	if code, body := get(t, r.URL+"/ui/"); code != 200 || !strings.Contains(body, "Health") {
		t.Fatalf("/ui/: %d %s", code, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, r.URL+"/ui/runs", nil)
	req.Host = "attacker.example:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("Host attacker.example: %d, want 403", resp.StatusCode)
	}
	run, err := r.Store().CreateRun(t.Context(), "victim", nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, r.URL+"/ui/act/fail",
		strings.NewReader(url.Values{"run": {run.ID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://attacker.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}
	if got, _ := r.Store().GetRun(t.Context(), run.ID); got.Status.Finished() {
		t.Error("a cross-site POST failed the run")
	}
}

// TestConsoleWithTokensSignsInAndShowsTheTokensNamespace signs in with a
// token through the form and sees its namespace's runs, not another's; a
// bad token is refused, and ConsoleAuthorize can refuse the actions.
func TestConsoleWithTokensSignsInAndShowsTheTokensNamespace(t *testing.T) {
	cfg := memConfig()
	cfg.Tokens = []Token{{Secret: "alpha-secret", Namespace: "team-a"}, {Secret: "beta-secret", Namespace: "team-b"},
		{Secret: "reader-secret", Namespace: "team-a", Scopes: []string{"state:read"}}}
	r := startHTTP(t, cfg)
	a, _ := r.Store().Namespace("team-a")
	b, _ := r.Store().Namespace("team-b")
	ra, err := a.CreateRun(t.Context(), "alpha-run", nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.CreateRun(t.Context(), "beta-run", nil)
	if err != nil {
		t.Fatal(err)
	}

	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	resp, err := cl.Get(r.URL + "/ui/runs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "Bearer token") || strings.Contains(string(body), ra.ID) {
		t.Fatalf("without a token /ui/runs must lead to the sign-in form: %d %s", resp.StatusCode, body)
	}
	resp, err = cl.PostForm(r.URL+"/ui/login", url.Values{"token": {"wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bad token signed in: %d", resp.StatusCode)
	}
	resp, err = cl.PostForm(r.URL+"/ui/login", url.Values{"token": {"alpha-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "team-a") {
		t.Fatalf("signed in, /ui/ answered %d: %s", resp.StatusCode, body)
	}
	resp, err = cl.Get(r.URL + "/ui/runs")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), ra.ID) || strings.Contains(string(body), rb.ID) {
		t.Errorf("team-a's console must list %s and not %s:\n%s", ra.ID, rb.ID, body)
	}
	resp, err = cl.Get(r.URL + "/ui/runs/" + rb.ID)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("team-a reading team-b's run: %d, want 404", resp.StatusCode)
	}

	// A token with the read scope only sees the run, without its actions,
	// and may not take them.
	run0, _ := a.CreateRun(context.Background(), "y", nil)
	req, _ := http.NewRequest(http.MethodGet, r.URL+"/ui/runs/"+run0.ID, nil)
	req.Header.Set("Authorization", "Bearer reader-secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(body), "Fail run") {
		t.Errorf("a reader's run page: %d, shows the actions: %v", resp.StatusCode, strings.Contains(string(body), "Fail run"))
	}
	req, _ = http.NewRequest(http.MethodPost, r.URL+"/ui/act/fail", strings.NewReader(url.Values{"run": {run0.ID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer reader-secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a reader failing a run: %d, want 403", resp.StatusCode)
	}
	if got, _ := a.GetRun(context.Background(), run0.ID); got.Status.Finished() {
		t.Error("a reader failed a run")
	}

	// The scope hook refuses the action; the run stays open.
	cfg.ConsoleAuthorize = func(r *http.Request, need console.Scope) error {
		if need != console.ScopeRead {
			return errors.New("needs " + string(need))
		}
		return nil
	}
	r2 := startHTTP(t, cfg)
	a2, _ := r2.Store().Namespace("team-a")
	run, _ := a2.CreateRun(context.Background(), "x", nil)
	req, _ = http.NewRequest(http.MethodPost, r2.URL+"/ui/act/fail", strings.NewReader(url.Values{"run": {run.ID}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer alpha-secret")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("fail without the admin scope: %d, want 403", resp.StatusCode)
	}
}
