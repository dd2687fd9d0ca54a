package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/statesidecar/state/internal/oidctest"
	"github.com/statesidecar/state/oauth"
)

const audience = "http://127.0.0.1:9/mcp"

// clock is a settable clock for the verifier.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func start(t *testing.T) *oidctest.Provider {
	t.Helper()
	return oidctest.Start(t, oidctest.Options{},
		oidctest.Client{ID: "reader", Secret: "r-secret", Subject: "alice@example.com", Tenant: "team-a",
			Audience: audience, Scopes: []string{"state:read"}},
		oidctest.Client{ID: "writer", Secret: "w-secret", Subject: "bob", Tenant: "team-b",
			Audience: audience, Scopes: []string{"state:read", "state:write"}},
		oidctest.Client{ID: "elsewhere", Secret: "e-secret", Subject: "carol", Tenant: "team-a",
			Audience: "https://other.example/mcp", Scopes: []string{"state:read"}},
	)
}

func newVerifier(t *testing.T, p *oidctest.Provider, c *clock, mod func(*oauth.Config)) *oauth.Verifier {
	t.Helper()
	cfg := oauth.Config{Issuer: p.Issuer, Audience: audience, TenantClaim: "tenant", Now: c.now}
	if mod != nil {
		mod(&cfg)
	}
	v, err := oauth.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func refused(t *testing.T, v *oauth.Verifier, tok, want string) {
	t.Helper()
	_, err := v.Verify(context.Background(), tok)
	if !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("token accepted or wrong error: %v", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}

func TestVerifyProviderToken(t *testing.T) {
	p := start(t)
	v := newVerifier(t, p, &clock{}, nil)
	c, err := v.Verify(context.Background(), p.MustToken(t, "writer", "w-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "bob" || c.Tenant != "team-b" || strings.Join(c.Scopes, " ") != "state:read state:write" || c.ClientID != "writer" {
		t.Fatalf("claims = %+v", c)
	}
	c, err = v.Verify(context.Background(), p.MustToken(t, "writer", "w-secret", "state:read"))
	if err != nil || strings.Join(c.Scopes, " ") != "state:read" {
		t.Fatalf("narrowed token: %+v, %v", c, err)
	}
}

func TestVerifyWrongAudience(t *testing.T) {
	p := start(t)
	v := newVerifier(t, p, &clock{}, nil)
	refused(t, v, p.MustToken(t, "elsewhere", "e-secret"), "audience")
}

func TestVerifyExpiry(t *testing.T) {
	p := start(t)
	c := &clock{}
	v := newVerifier(t, p, c, nil)
	tok := p.MustToken(t, "reader", "r-secret")
	cl, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	// 20 s past exp is within the 30 s leeway; 40 s is not.
	c.advance(time.Until(cl.Expiry) + 20*time.Second)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	c.advance(20 * time.Second)
	refused(t, v, tok, "expired")
}

func TestVerifyNotBefore(t *testing.T) {
	p := start(t)
	c := &clock{}
	v := newVerifier(t, p, c, nil)
	tok := p.MustToken(t, "reader", "r-secret")
	c.advance(-40 * time.Second) // the token's nbf is 40 s in the verifier's future
	refused(t, v, tok, "not valid before")
	c.advance(20 * time.Second)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("nbf within the leeway: %v", err)
	}
}

// claimsOf returns the payload of a JWT, decoded without verification.
func claimsOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func headerOf(t *testing.T, tok string) map[string]any {
	t.Helper()
	b, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// sign signs claims with key under kid and alg.
func sign(t *testing.T, claims map[string]any, alg jose.SignatureAlgorithm, key any, kid string) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(claims)
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVerifyUnknownKey(t *testing.T) {
	p := start(t)
	v := newVerifier(t, p, &clock{}, nil)
	good := p.MustToken(t, "writer", "w-secret")
	claims := claimsOf(t, good) // the provider's own claims: only the key differs
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	refused(t, v, sign(t, claims, jose.RS256, stranger, "stranger"), "key the issuer does not publish")
	// The provider's key id on a stranger's signature.
	refused(t, v, sign(t, claims, jose.RS256, stranger, headerOf(t, good)["kid"].(string)), "key the issuer does not publish")
	refused(t, v, sign(t, claims, jose.RS256, stranger, ""), "key the issuer does not publish")
}

func TestVerifyRefusesAlgNoneAndHMAC(t *testing.T) {
	p := start(t)
	v := newVerifier(t, p, &clock{}, nil)
	good := p.MustToken(t, "writer", "w-secret")
	parts := strings.Split(good, ".")
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	none := enc(map[string]any{"alg": "none", "typ": "JWT", "kid": headerOf(t, good)["kid"]}) + "." + parts[1] + "."
	refused(t, v, none, "malformed jwt")
	none = enc(map[string]any{"alg": "none"}) + "." + parts[1] + "." + parts[2]
	refused(t, v, none, "malformed jwt")
	// HS256 keyed with something public (the classic key-confusion attack).
	hs := sign(t, claimsOf(t, good), jose.HS256, []byte(p.Issuer+"/keys and some more bytes"), headerOf(t, good)["kid"].(string))
	refused(t, v, hs, "malformed jwt")
	refused(t, v, "not-a-jwt", "not a JWT")
}

func TestVerifyFollowsKeyRotation(t *testing.T) {
	p := start(t)
	c := &clock{}
	v := newVerifier(t, p, c, nil)
	old := p.MustToken(t, "reader", "r-secret")
	if _, err := v.Verify(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	kid := p.Rotate(t, true) // the old key leaves the JWKS
	fresh := p.MustToken(t, "reader", "r-secret")
	if got := headerOf(t, fresh)["kid"]; got != kid {
		t.Fatalf("new token's kid = %v, want %s", got, kid)
	}
	// Within MinRefreshInterval of the last fetch the unknown key is not
	// fetched: a flood of made-up key ids cannot flood the issuer.
	refused(t, v, fresh, "key the issuer does not publish")
	c.advance(oauth.DefaultMinRefreshInterval)
	if _, err := v.Verify(context.Background(), fresh); err != nil {
		t.Fatalf("token of the rotated key: %v", err)
	}
	refused(t, v, old, "key the issuer does not publish") // the retired key is gone from the cache
}

func TestVerifyRefreshesOldKeys(t *testing.T) {
	p := start(t)
	c := &clock{}
	v := newVerifier(t, p, c, nil)
	old := p.MustToken(t, "reader", "r-secret")
	if _, err := v.Verify(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	p.Rotate(t, true)
	if _, err := v.Verify(context.Background(), old); err != nil {
		t.Fatalf("cached key used before MaxKeyAge: %v", err)
	}
	c.advance(oauth.DefaultMaxKeyAge)
	refused(t, v, old, "key the issuer does not publish")
}

func TestVerifyTenantClaimRequired(t *testing.T) {
	p := start(t)
	v := newVerifier(t, p, &clock{}, func(c *oauth.Config) { c.TenantClaim = "org" })
	refused(t, v, p.MustToken(t, "reader", "r-secret"), `no "org" claim`)
	v = newVerifier(t, p, &clock{}, func(c *oauth.Config) { c.TenantClaim = ""; c.SubjectClaim = "client_id" })
	cl, err := v.Verify(context.Background(), p.MustToken(t, "reader", "r-secret"))
	if err != nil || cl.Subject != "reader" || cl.Tenant != "" {
		t.Fatalf("claims = %+v, %v", cl, err)
	}
}

func TestConfigChecks(t *testing.T) {
	for _, tc := range []struct {
		cfg  oauth.Config
		want string
	}{
		{oauth.Config{Issuer: "http://idp.example.com", Audience: audience}, "loopback"},
		{oauth.Config{Issuer: "ftp://127.0.0.1", Audience: audience}, "https"},
		{oauth.Config{Issuer: "https://idp.example.com", Audience: ""}, "Audience is empty"},
		{oauth.Config{Issuer: "https://idp.example.com", Audience: "/mcp"}, "absolute URI"},
		{oauth.Config{Issuer: "https://idp.example.com", Audience: audience, Algorithms: []string{"HS256"}}, "asymmetric"},
		{oauth.Config{Issuer: "https://idp.example.com", Audience: audience, Algorithms: []string{"none"}}, "asymmetric"},
	} {
		_, err := oauth.New(context.Background(), tc.cfg)
		if !errors.Is(err, oauth.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want ErrConfig saying %q", tc.cfg, err, tc.want)
		}
	}
	_, err := oauth.New(context.Background(), oauth.Config{Issuer: "http://127.0.0.1:1", Audience: audience})
	if !errors.Is(err, oauth.ErrDiscovery) {
		t.Errorf("unreachable issuer: err = %v, want ErrDiscovery", err)
	}
}

func TestMetadataURL(t *testing.T) {
	if got := oauth.MetadataURL("https://sidecar.example:8443/mcp"); got != "https://sidecar.example:8443/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("MetadataURL = %s", got)
	}
	if got := oauth.MetadataPaths("https://sidecar.example/"); len(got) != 1 || got[0] != oauth.WellKnownPath {
		t.Errorf("MetadataPaths of a root resource = %v", got)
	}
	ch := oauth.Challenge("https://s.example/mcp", errors.New(`bad "quoted"`))
	if ch != `Bearer resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="bad 'quoted'"` {
		t.Errorf("Challenge = %s", ch)
	}
}

// BenchmarkVerify measures checking a provider's RS256 token with its key
// cached: what OAuth adds to each request.
func BenchmarkVerify(b *testing.B) {
	p := oidctest.Start(b, oidctest.Options{}, oidctest.Client{ID: "c", Secret: "s", Subject: "sub", Tenant: "t",
		Audience: audience, Scopes: []string{"state:read"}})
	v, err := oauth.New(context.Background(), oauth.Config{Issuer: p.Issuer, Audience: audience, TenantClaim: "tenant"})
	if err != nil {
		b.Fatal(err)
	}
	tok := p.MustToken(b, "c", "s")
	for b.Loop() {
		if _, err := v.Verify(context.Background(), tok); err != nil {
			b.Fatal(err)
		}
	}
}

// TestVerifyConcurrent: goroutines released together verify tokens while
// the issuer rotates its key; every valid token is accepted (run with
// -race).
func TestVerifyConcurrent(t *testing.T) {
	p := start(t)
	c := &clock{}
	v := newVerifier(t, p, c, func(cfg *oauth.Config) { cfg.MinRefreshInterval = -1 })
	toks := []string{p.MustToken(t, "reader", "r-secret"), p.MustToken(t, "writer", "w-secret")}
	p.Rotate(t, false)
	toks = append(toks, p.MustToken(t, "reader", "r-secret"))
	start := make(chan struct{})
	errs := make(chan error, 8*20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range 20 {
				if _, err := v.Verify(context.Background(), toks[(g+i)%len(toks)]); err != nil {
					errs <- err
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
