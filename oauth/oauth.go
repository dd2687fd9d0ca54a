// Package oauth makes an HTTP server an OAuth 2.1 resource server in the
// sense of the MCP authorization specification: it validates JWT access
// tokens issued by one configured authorization server and describes
// itself with RFC 9728 protected-resource metadata.
//
// A [Verifier] finds the issuer's JWKS by OpenID Connect discovery and
// checks each token's signature (asymmetric algorithms only: "none" and the
// HMAC algorithms are refused), its issuer, that its audience contains the
// resource's URI, and its expiry and not-before times with a small leeway.
// Signing keys are cached; a token signed with a key the cache does not
// hold makes the verifier fetch the JWKS again (at most once per
// MinRefreshInterval), so the issuer's key rotations are followed without
// a restart, and the cache is refreshed when it is older than MaxKeyAge.
//
// It is built on github.com/coreos/go-oidc/v3 (discovery and claim checks)
// and github.com/go-jose/go-jose/v4 (signatures), both widely deployed and
// maintained; the key cache is this package's own, because go-oidc's
// refetches the JWKS for every unknown key id without a limit.
package oauth

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Defaults of Config.
const (
	DefaultLeeway             = 30 * time.Second
	DefaultMinRefreshInterval = 10 * time.Second
	DefaultMaxKeyAge          = 10 * time.Minute
	DefaultSubjectClaim       = "sub"
	DefaultHTTPTimeout        = 10 * time.Second
)

// DefaultAlgorithms are the signature algorithms accepted when
// Config.Algorithms is empty: every asymmetric JWS algorithm.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// Errors. A token that is refused matches ErrInvalidToken; a configuration
// that cannot work matches ErrConfig; an issuer that cannot be reached or
// discovered matches ErrDiscovery.
var (
	ErrInvalidToken = errors.New("invalid access token")
	ErrConfig       = errors.New("invalid OAuth configuration")
	ErrDiscovery    = errors.New("OpenID Connect discovery failed")
)

// Config configures a Verifier.
type Config struct {
	// Issuer is the authorization server's issuer URL, as its tokens' iss
	// claim and its discovery document name it. It must be https, or http
	// on a loopback host (as in tests).
	Issuer string
	// Audience is this resource server's URI (for the sidecar, the URL of
	// its /mcp endpoint): a token's aud claim must contain it.
	Audience string
	// TenantClaim, if set, names the claim that carries the caller's tenant
	// (a string); a token without it is refused.
	TenantClaim string
	// SubjectClaim names the claim that identifies the caller (a string).
	// Defaults to "sub".
	SubjectClaim string
	// Algorithms lists the accepted signature algorithms; empty means
	// DefaultAlgorithms. Only asymmetric algorithms may be named.
	Algorithms []string
	// Leeway is the clock skew allowed on exp and nbf. Defaults to 30 s;
	// negative means none.
	Leeway time.Duration
	// MinRefreshInterval is the least time between two JWKS fetches caused
	// by unknown key ids. Defaults to 10 s; negative means no limit.
	MinRefreshInterval time.Duration
	// MaxKeyAge is how long fetched keys are used before the JWKS is
	// fetched again. Defaults to 10 minutes.
	MaxKeyAge time.Duration
	// HTTPClient fetches the discovery document and the JWKS. Defaults to a
	// client with a 10 s timeout.
	HTTPClient *http.Client
	// Now returns the current time; defaults to time.Now.
	Now func() time.Time
}

// Claims is what a valid token says about its caller.
type Claims struct {
	// Subject is the value of the subject claim: the principal.
	Subject string
	// Tenant is the value of the tenant claim, or "" when no TenantClaim is
	// configured.
	Tenant string
	// Scopes are the token's scopes, from its "scope" claim (a
	// space-separated string) or, failing that, its "scp" claim (a list or
	// a string).
	Scopes []string
	// ClientID is the client_id or azp claim, if any.
	ClientID string
	// Expiry is the exp claim.
	Expiry time.Time
}

// A Verifier validates access tokens. It is safe for concurrent use.
type Verifier struct {
	cfg      Config
	verifier *oidc.IDTokenVerifier
	keys     *keySet
	jwksURL  string
	cache    verified
}

// verified remembers the claims of tokens verified recently, by digest, so
// that a client sending the same token with every request pays for one
// signature check, not one per request. An entry lasts until the token's
// exp, at most maxCacheAge, and only while the key set it was verified
// under is current: a refetched JWKS (a rotation, a withdrawn key) empties
// it.
type verified struct {
	mu  sync.Mutex
	gen uint64
	m   map[[sha256.Size]byte]cachedClaims
}

type cachedClaims struct {
	claims *Claims
	until  time.Time
}

// Bounds of the cache of verified tokens.
const (
	maxCacheAge     = time.Minute
	maxCacheEntries = 10_000
)

func (c *verified) get(d [sha256.Size]byte, gen uint64, now time.Time) (*Claims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[d]
	if !ok || c.gen != gen || !now.Before(e.until) {
		return nil, false
	}
	cl := *e.claims
	cl.Scopes = slices.Clone(cl.Scopes)
	return &cl, true
}

func (c *verified) put(d [sha256.Size]byte, gen uint64, cl *Claims, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.gen != gen || len(c.m) >= maxCacheEntries {
		c.m, c.gen = map[[sha256.Size]byte]cachedClaims{}, gen
	}
	cp := *cl
	cp.Scopes = slices.Clone(cl.Scopes)
	c.m[d] = cachedClaims{claims: &cp, until: until}
}

// New discovers cfg.Issuer's configuration and returns a Verifier for it.
// ctx bounds the discovery only.
func New(ctx context.Context, cfg Config) (*Verifier, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	cctx := oidc.ClientContext(ctx, cfg.HTTPClient)
	p, err := oidc.NewProvider(cctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: issuer %s: %v", ErrDiscovery, cfg.Issuer, err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, fmt.Errorf("%w: issuer %s: its discovery document has no jwks_uri", ErrDiscovery, cfg.Issuer)
	}
	if err := checkURL("jwks_uri", doc.JWKSURI); err != nil {
		return nil, fmt.Errorf("%w: issuer %s: %v", ErrDiscovery, cfg.Issuer, err)
	}
	v := &Verifier{cfg: cfg, jwksURL: doc.JWKSURI}
	v.keys = newKeySet(doc.JWKSURI, &cfg)
	leeway := cfg.Leeway
	v.verifier = oidc.NewVerifier(cfg.Issuer, v.keys, &oidc.Config{
		ClientID:             cfg.Audience,
		SupportedSigningAlgs: cfg.Algorithms,
		// go-oidc checks exp against Now with no leeway: a Now that is
		// leeway earlier gives exp its leeway. nbf is checked below.
		Now: func() time.Time { return cfg.Now().Add(-leeway) },
	})
	return v, nil
}

// check validates the configuration and fills in defaults.
func (c *Config) check() error {
	if err := checkURL("Issuer", c.Issuer); err != nil {
		return err
	}
	if c.Audience == "" {
		return fmt.Errorf("%w: Audience is empty: set it to this server's resource URI", ErrConfig)
	}
	if u, err := url.Parse(c.Audience); err != nil || u.Scheme == "" || u.Host == "" || u.Fragment != "" {
		return fmt.Errorf("%w: Audience %q is not an absolute URI without a fragment", ErrConfig, c.Audience)
	}
	if c.SubjectClaim == "" {
		c.SubjectClaim = DefaultSubjectClaim
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = DefaultAlgorithms
	}
	for _, a := range c.Algorithms {
		if !slices.Contains(DefaultAlgorithms, a) {
			return fmt.Errorf("%w: Algorithms: %q is not an asymmetric JWS algorithm (allowed: %s)", ErrConfig, a, strings.Join(DefaultAlgorithms, ", "))
		}
	}
	switch {
	case c.Leeway == 0:
		c.Leeway = DefaultLeeway
	case c.Leeway < 0:
		c.Leeway = 0
	}
	switch {
	case c.MinRefreshInterval == 0:
		c.MinRefreshInterval = DefaultMinRefreshInterval
	case c.MinRefreshInterval < 0:
		c.MinRefreshInterval = 0
	}
	if c.MaxKeyAge <= 0 {
		c.MaxKeyAge = DefaultMaxKeyAge
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: DefaultHTTPTimeout}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// checkURL accepts https URLs, and http URLs of loopback hosts.
func checkURL(field, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %s %q is not an absolute URL", ErrConfig, field, raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if IsLoopback(u.Hostname()) {
			return nil
		}
		return fmt.Errorf("%w: %s %q uses plain http, which is allowed only for a loopback host (localhost, 127.0.0.0/8, ::1)", ErrConfig, field, raw)
	}
	return fmt.Errorf("%w: %s %q must be an https URL", ErrConfig, field, raw)
}

// IsLoopback reports whether host (without port) is localhost or a
// loopback address.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Issuer returns the configured issuer URL.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Audience returns the configured audience: the resource's URI.
func (v *Verifier) Audience() string { return v.cfg.Audience }

// Verify validates a raw JWT access token and returns its claims. Every
// refusal matches ErrInvalidToken, with the reason in the message (which
// names no secret and may be shown to the client).
func (v *Verifier) Verify(ctx context.Context, raw string) (*Claims, error) {
	if strings.Count(raw, ".") != 2 {
		return nil, fmt.Errorf("%w: not a JWT", ErrInvalidToken)
	}
	d, gen, now := sha256.Sum256([]byte(raw)), v.keys.generation(), v.cfg.Now()
	if cl, ok := v.cache.get(d, gen, now); ok {
		return cl, nil
	}
	cl, err := v.verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	if gen == v.keys.generation() { // else verified with keys fetched since: next time
		v.cache.put(d, gen, cl, minTime(cl.Expiry, now.Add(maxCacheAge)))
	}
	return cl, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// verify checks raw with the issuer's keys.
func (v *Verifier) verify(ctx context.Context, raw string) (*Claims, error) {
	tok, err := v.verifier.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return nil, fmt.Errorf("%w: expired at %s", ErrInvalidToken, expired.Expiry.UTC().Format(time.RFC3339))
		}
		return nil, fmt.Errorf("%w: %s", ErrInvalidToken, strings.TrimPrefix(err.Error(), "oidc: "))
	}
	var c map[string]json.RawMessage
	if err := tok.Claims(&c); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrInvalidToken, err)
	}
	if raw, ok := c["nbf"]; ok {
		var nbf float64
		if err := json.Unmarshal(raw, &nbf); err != nil {
			return nil, fmt.Errorf("%w: nbf is not a number", ErrInvalidToken)
		}
		if t := time.Unix(int64(nbf), 0); v.cfg.Now().Add(v.cfg.Leeway).Before(t) {
			return nil, fmt.Errorf("%w: not valid before %s", ErrInvalidToken, t.UTC().Format(time.RFC3339))
		}
	}
	out := &Claims{Expiry: tok.Expiry}
	if out.Subject, err = stringClaim(c, v.cfg.SubjectClaim); err != nil {
		return nil, err
	}
	if v.cfg.TenantClaim != "" {
		if out.Tenant, err = stringClaim(c, v.cfg.TenantClaim); err != nil {
			return nil, err
		}
	}
	out.Scopes = scopesOf(c)
	for _, name := range []string{"client_id", "azp"} {
		if s, err := stringClaim(c, name); err == nil {
			out.ClientID = s
			break
		}
	}
	return out, nil
}

// stringClaim returns the non-empty string claim name.
func stringClaim(c map[string]json.RawMessage, name string) (string, error) {
	raw, ok := c[name]
	if !ok {
		return "", fmt.Errorf("%w: the token has no %q claim", ErrInvalidToken, name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || s == "" {
		return "", fmt.Errorf("%w: the %q claim is not a non-empty string", ErrInvalidToken, name)
	}
	return s, nil
}

// scopesOf reads "scope" (RFC 9068: space-separated) or "scp" (a list, as
// some issuers send).
func scopesOf(c map[string]json.RawMessage) []string {
	for _, name := range []string{"scope", "scp"} {
		raw, ok := c[name]
		if !ok {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return strings.Fields(s)
		}
		var l []string
		if json.Unmarshal(raw, &l) == nil {
			return l
		}
	}
	return nil
}
