// Package oidctest runs a real OpenID provider for tests: interop/oidcop,
// the OpenID provider of github.com/zitadel/oidc/v3, as a separate process
// on a loopback port. It issues client-credentials JWT access tokens, serves
// discovery and JWKS, and rotates its signing key on request.
//
// The program is built once per test binary from interop/oidcop (its own
// module, so the core does not depend on zitadel), or taken from the path
// in STATE_TEST_OIDCOP_BIN (which .ci/run sets after building it).
package oidctest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// BinEnv names the variable that may hold the path of a built oidcop.
const BinEnv = "STATE_TEST_OIDCOP_BIN"

// A Client is a client-credentials client of the provider.
type Client struct {
	ID, Secret string
	// Subject is its tokens' sub claim.
	Subject string
	// Tenant, if not empty, is its tokens' tenant claim.
	Tenant string
	// Audience is its tokens' aud claim.
	Audience string
	// Scopes are the scopes it may ask for (all of them when it asks for
	// none).
	Scopes []string
}

// Options configure the provider.
type Options struct {
	// TenantClaim names the tenant claim; defaults to "tenant".
	TenantClaim string
	// Lifetime is the tokens' lifetime; defaults to 5 minutes.
	Lifetime time.Duration
}

// A Provider is a running oidcop.
type Provider struct {
	// Issuer is its issuer URL (http://127.0.0.1:port).
	Issuer string
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// bin returns the path of the oidcop program, building it the first time.
func bin() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		src := filepath.Join(filepath.Dir(file), "..", "..", "interop", "oidcop")
		dir, err := os.MkdirTemp("", "oidcop")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "oidcop")
		cmd := exec.Command("go", "build", "-o", buildPath, ".")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building interop/oidcop: %v\n%s", err, out)
		}
	})
	return buildPath, buildErr
}

// Start starts a provider with clients; it is stopped when the test ends.
func Start(t testing.TB, opts Options, clients ...Client) *Provider {
	t.Helper()
	path, err := bin()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{}
	if opts.TenantClaim != "" {
		args = append(args, "-tenant-claim", opts.TenantClaim)
	}
	if opts.Lifetime > 0 {
		args = append(args, "-lifetime", opts.Lifetime.String())
	}
	for _, c := range clients {
		args = append(args, "-client", strings.Join([]string{c.ID, c.Secret, c.Subject, c.Tenant, c.Audience, strings.Join(c.Scopes, " ")}, "|"))
	}
	cmd := exec.Command(path, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting oidcop: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("oidcop did not announce its issuer: %v", err)
	}
	issuer, ok := strings.CutPrefix(strings.TrimSpace(line), "issuer ")
	if !ok {
		t.Fatalf("oidcop said %q, not its issuer", line)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return &Provider{Issuer: issuer}
}

// Token gets an access token for the client by the client-credentials
// grant, asking for scopes (none: all the client's).
func (p *Provider) Token(ctx context.Context, id, secret string, scopes ...string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint: %s: %s", resp.Status, body)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", fmt.Errorf("token endpoint: no access_token in %s", body)
	}
	return tr.AccessToken, nil
}

// MustToken is Token that fails the test on error.
func (p *Provider) MustToken(t testing.TB, id, secret string, scopes ...string) string {
	t.Helper()
	tok, err := p.Token(context.Background(), id, secret, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Rotate makes a new signing key current and returns its id; with retire
// the old keys leave the JWKS.
func (p *Provider) Rotate(t testing.TB, retire bool) string {
	t.Helper()
	u := p.Issuer + "/test/rotate"
	if retire {
		u += "?retire=1"
	}
	resp, err := http.Post(u, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("rotate: %s: %s", resp.Status, body)
	}
	return strings.TrimSpace(string(body))
}
