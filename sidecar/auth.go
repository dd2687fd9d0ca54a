package sidecar

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/mcptasks"
	"github.com/statesidecar/state/oauth"
)

// A Token is a bearer token, the namespace its requests work in and the
// scopes it grants. An empty Namespace means the store's default namespace;
// no Scopes means every scope (admin access: what a token could do before
// scopes existed).
type Token struct {
	Secret    string
	Namespace string
	Scopes    []string
}

// String hides the secret, so that a Token can be logged.
func (t Token) String() string {
	ns := t.Namespace
	if ns == "" {
		ns = "(default)"
	}
	if len(t.Scopes) > 0 {
		ns += "|" + strings.Join(t.Scopes, " ")
	}
	return "token(" + ns + ")"
}

// ParseTokens parses SIDECAR_AUTH_TOKENS: comma-separated items
// "token[:namespace][|scope ...]". Blank items are skipped; a token may
// itself contain ':' (the namespace follows the last one, and namespaces
// cannot contain ':'); after '|' come the token's scopes, separated by
// spaces or '+' (such as "t1:team-a|state:read"); a token cannot contain
// '|'. A token given twice is an error.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		t := Token{Secret: item}
		if head, scopes, ok := strings.Cut(item, "|"); ok {
			t.Secret = strings.TrimSpace(head)
			t.Scopes = strings.FieldsFunc(scopes, func(r rune) bool { return r == ' ' || r == '+' })
			if len(t.Scopes) == 0 {
				return nil, fmt.Errorf("token #%d: no scope after '|'", len(out)+1)
			}
		}
		if i := strings.LastIndexByte(t.Secret, ':'); i >= 0 {
			t.Secret, t.Namespace = strings.TrimSpace(t.Secret[:i]), strings.TrimSpace(t.Secret[i+1:])
			if t.Namespace == "" {
				return nil, fmt.Errorf("token #%d: empty namespace after ':'", len(out)+1)
			}
		}
		if t.Secret == "" {
			return nil, fmt.Errorf("token #%d: empty token", len(out)+1)
		}
		if seen[t.Secret] {
			return nil, fmt.Errorf("token #%d: given twice", len(out)+1)
		}
		seen[t.Secret] = true
		out = append(out, t)
	}
	return out, nil
}

// ScopeNames names the scopes that grant each access level: a scope grants
// its level and the levels below it.
type ScopeNames struct {
	Read, Write, Admin string
}

// DefaultScopeNames are state:read, state:write and state:admin.
func DefaultScopeNames() ScopeNames {
	return ScopeNames{Read: "state:read", Write: "state:write", Admin: "state:admin"}
}

// ParseScopeNames parses SIDECAR_OAUTH_SCOPES: the names of the read, write
// and admin scopes, comma-separated, all different.
func ParseScopeNames(s string) (ScopeNames, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return ScopeNames{}, fmt.Errorf("want three scope names, read,write,admin (such as %s), got %d", DefaultScopeNames(), len(f))
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
		if f[i] == "" || strings.ContainsAny(f[i], " ,|+\"\\") {
			return ScopeNames{}, fmt.Errorf("scope name #%d %q is empty or holds a space, ',', '|', '+', '\"' or '\\'", i+1, f[i])
		}
	}
	if f[0] == f[1] || f[1] == f[2] || f[0] == f[2] {
		return ScopeNames{}, errors.New("the three scope names must differ")
	}
	return ScopeNames{Read: f[0], Write: f[1], Admin: f[2]}, nil
}

// String returns the names as SIDECAR_OAUTH_SCOPES takes them.
func (n ScopeNames) String() string { return n.Read + "," + n.Write + "," + n.Admin }

// list returns the names, read first.
func (n ScopeNames) list() []string { return []string{n.Read, n.Write, n.Admin} }

// access returns the highest level that scopes grant.
func (n ScopeNames) access(scopes []string) mcpadapter.Access {
	switch {
	case slices.Contains(scopes, n.Admin):
		return mcpadapter.AccessAdmin
	case slices.Contains(scopes, n.Write):
		return mcpadapter.AccessWrite
	case slices.Contains(scopes, n.Read):
		return mcpadapter.AccessRead
	}
	return mcpadapter.AccessNone
}

// OAuthConfig makes the sidecar an OAuth 2.1 resource server: /mcp accepts
// JWT access tokens from Issuer whose audience is Audience (besides any
// static Tokens). See package oauth.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer URL (https, or http for
	// a loopback host). Empty turns OAuth off.
	Issuer string
	// Audience is the sidecar's resource URI, the URL clients reach /mcp
	// at (such as https://state.example.com/mcp); required with Issuer.
	Audience string
	// TenantClaim, if set, names the claim whose value is the namespace the
	// caller works in; without it every OAuth caller works in the default
	// namespace.
	TenantClaim string
	// SubjectClaim names the claim that identifies the caller (the
	// principal); defaults to "sub".
	SubjectClaim string

	minRefreshInterval time.Duration // oauth.Config's, for tests
}

// checkAuth checks the settings of authentication against each other.
func (c *Config) checkAuth() error {
	if c.OAuth.Issuer == "" {
		if c.OAuth.Audience != "" || c.OAuth.TenantClaim != "" {
			return fmt.Errorf("%w: SIDECAR_OAUTH_AUDIENCE and SIDECAR_OAUTH_TENANT_CLAIM need SIDECAR_OAUTH_ISSUER", ErrConfig)
		}
	} else if c.OAuth.Audience == "" {
		return fmt.Errorf("%w: SIDECAR_OAUTH_ISSUER needs SIDECAR_OAUTH_AUDIENCE, the URL clients reach /mcp at (such as https://state.example.com/mcp)", ErrConfig)
	}
	names := c.scopeNames()
	for i, t := range c.Tokens {
		for _, sc := range t.Scopes {
			if !slices.Contains(names.list(), sc) {
				return fmt.Errorf("%w: SIDECAR_AUTH_TOKENS: token #%d: unknown scope %q: the scopes are %s", ErrConfig, i+1, sc, names)
			}
		}
	}
	return nil
}

// scopeNames returns the configured scope names, or the defaults.
func (c *Config) scopeNames() ScopeNames {
	if c.Scopes == (ScopeNames{}) {
		return DefaultScopeNames()
	}
	return c.Scopes
}

// authenticates reports whether /mcp requires credentials.
func (c *Config) authenticates() bool { return len(c.Tokens) > 0 || c.OAuth.Issuer != "" }

// An authenticator checks bearer tokens: static ones, whose digests it
// compares in constant time (so neither a token's content nor its length
// leaks through timing), and, with OAuth, JWT access tokens.
type authenticator struct {
	digests  [][sha256.Size]byte
	tokens   []Token
	verifier *oauth.Verifier // nil without OAuth
	names    ScopeNames
	// checkTenant validates the namespace a token's tenant claim names.
	checkTenant func(string) error
	onFailure   func()
}

// newAuthenticator returns the authenticator of the sidecar's settings;
// with OAuth it discovers the issuer first.
func (s *Sidecar) newAuthenticator(ctx context.Context) (*authenticator, error) {
	c := &s.cfg
	a := &authenticator{tokens: c.Tokens, names: c.scopeNames(), onFailure: s.metrics.AuthFailed}
	for _, t := range c.Tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t.Secret)))
	}
	a.checkTenant = func(ns string) error {
		if _, err := s.store.Namespace(ns); err != nil {
			return err
		}
		if c.Tasks.Enabled && ns == mcptasks.DefaultNamespace {
			return fmt.Errorf("namespace %q holds the sidecar's tasks", ns)
		}
		return nil
	}
	if c.OAuth.Issuer != "" {
		v, err := oauth.New(ctx, oauth.Config{Issuer: c.OAuth.Issuer, Audience: c.OAuth.Audience,
			TenantClaim: c.OAuth.TenantClaim, SubjectClaim: c.OAuth.SubjectClaim, MinRefreshInterval: c.OAuth.minRefreshInterval})
		if err != nil {
			return nil, fmt.Errorf("%w: SIDECAR_OAUTH_ISSUER: %v", ErrConfig, err)
		}
		a.verifier = v
	}
	return a, nil
}

// Errors of authenticate.
var (
	errNoToken           = errors.New("missing bearer token")
	errBadToken          = errors.New("invalid bearer token")
	errInsufficientScope = errors.New("insufficient scope")
)

// An identity is who a request's credentials name.
type identity struct {
	caller    mcpadapter.Caller
	namespace string // "" for the default namespace
}

// authenticate returns the identity of the request's bearer token, or an
// error matching errNoToken, errBadToken or errInsufficientScope.
func (a *authenticator) authenticate(r *http.Request) (identity, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return identity{}, errNoToken
	}
	tok = strings.TrimSpace(tok)
	d := sha256.Sum256([]byte(tok))
	match := -1
	for i := range a.digests { // no early exit: every request costs the same
		if subtle.ConstantTimeCompare(d[:], a.digests[i][:]) == 1 {
			match = i
		}
	}
	if match >= 0 {
		t := a.tokens[match]
		c := mcpadapter.Caller{Principal: tokenPrincipal(tok), Access: mcpadapter.AccessAdmin, Scopes: t.Scopes}
		if len(t.Scopes) > 0 {
			c.Access = a.names.access(t.Scopes)
		}
		return identity{caller: c, namespace: t.Namespace}, nil
	}
	if a.verifier == nil {
		return identity{}, fmt.Errorf("%w: unknown bearer token", errBadToken)
	}
	cl, err := a.verifier.Verify(r.Context(), tok)
	if err != nil {
		if errors.Is(err, oauth.ErrInvalidToken) {
			return identity{}, fmt.Errorf("%w: %s", errBadToken, strings.TrimPrefix(err.Error(), oauth.ErrInvalidToken.Error()+": "))
		}
		return identity{}, fmt.Errorf("%w: the token could not be checked: %v", errBadToken, err)
	}
	c := mcpadapter.Caller{Principal: cl.Subject, Access: a.names.access(cl.Scopes), Scopes: cl.Scopes}
	if c.Access == mcpadapter.AccessNone {
		return identity{}, fmt.Errorf("%w: the token has none of the scopes %s", errInsufficientScope, a.names)
	}
	if cl.Tenant != "" {
		if err := a.checkTenant(cl.Tenant); err != nil {
			return identity{}, fmt.Errorf("%w: the tenant claim does not name a usable namespace: %v", errBadToken, err)
		}
	}
	return identity{caller: c, namespace: cl.Tenant}, nil
}

// challenge is the WWW-Authenticate value of a refusal with err.
func (a *authenticator) challenge(err error) string {
	if a.verifier != nil {
		res := a.verifier.Audience()
		switch {
		case errors.Is(err, errInsufficientScope):
			return `Bearer resource_metadata="` + oauth.MetadataURL(res) + `", error="insufficient_scope", scope="` + a.names.Read + `"`
		case errors.Is(err, errBadToken):
			return oauth.Challenge(res, err)
		}
		return oauth.Challenge(res, nil)
	}
	c := `Bearer realm="mcp-state-sidecar"`
	if errors.Is(err, errBadToken) {
		c += `, error="invalid_token", error_description="unknown bearer token"`
	}
	return c
}

// wrap returns next behind bearer authentication: a request without a valid
// token gets 401 (403 for a token without any of the scopes) with a
// WWW-Authenticate header, from its headers alone: the connection is closed
// rather than its body read, so that an unauthenticated client cannot hold
// the server with a slow body. A valid one reaches next with its token's
// namespace (mcpadapter.WithNamespace) and caller (mcpadapter.WithCaller)
// in the context.
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := a.authenticate(r)
		if err != nil {
			if a.onFailure != nil {
				a.onFailure()
			}
			w.Header().Set("WWW-Authenticate", a.challenge(err))
			refuseBody(w)
			code := http.StatusUnauthorized
			if errors.Is(err, errInsufficientScope) {
				code = http.StatusForbidden
			}
			http.Error(w, fmt.Sprintf("%d %s: %v", code, strings.ToLower(http.StatusText(code)), err), code)
			return
		}
		ctx := mcpadapter.WithCaller(r.Context(), id.caller)
		if id.namespace != "" {
			ctx = mcpadapter.WithNamespace(ctx, id.namespace)
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// routes adds the RFC 9728 metadata of an OAuth resource server to mux.
func (a *authenticator) routes(mux *http.ServeMux) {
	if a == nil || a.verifier == nil {
		return
	}
	h := oauth.MetadataHandler(a.verifier.Metadata(a.names.list(), mcpadapter.ServerName))
	for _, p := range oauth.MetadataPaths(a.verifier.Audience()) {
		mux.Handle(p, h)
	}
}

// tokenPrincipal names the caller of a static bearer token: "token:" and a
// digest of it, so that neither history nor task records hold a secret.
func tokenPrincipal(tok string) string {
	d := sha256.Sum256([]byte(tok))
	return "token:" + hex.EncodeToString(d[:12])
}

// ownerPrincipal is the Principal of the owner of a caller's tasks: the
// access level, ':' and the principal, so that a task runs with the access
// of the request that created it (taskCaller).
func ownerPrincipal(c mcpadapter.Caller) string { return c.Access.String() + ":" + c.Principal }

// taskCaller is the caller a task of owner o runs as (see ownerPrincipal).
func taskCaller(o mcptasks.Owner) (mcpadapter.Caller, bool) {
	lvl, p, ok := strings.Cut(o.Principal, ":")
	if !ok {
		return mcpadapter.Caller{}, false
	}
	for _, a := range []mcpadapter.Access{mcpadapter.AccessRead, mcpadapter.AccessWrite, mcpadapter.AccessAdmin} {
		if a.String() == lvl {
			return mcpadapter.Caller{Principal: p, Access: a}, true
		}
	}
	return mcpadapter.Caller{Principal: p, Access: mcpadapter.AccessNone}, true
}

// accessLog is a tool middleware that logs every tool call, with who made
// it (the authenticated principal, apart from any agent id in the
// arguments), its namespace, how long it took and whether it failed.
func (s *Sidecar) accessLog(next server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		res, err := next(ctx, req)
		attrs := []slog.Attr{slog.String("tool", req.Params.Name)}
		if c, ok := mcpadapter.CallerFrom(ctx); ok {
			attrs = append(attrs, slog.String("principal", c.Principal), slog.String("access", c.Access.String()))
		}
		if ns, ok := mcpadapter.NamespaceFrom(ctx); ok {
			attrs = append(attrs, slog.String("namespace", ns))
		}
		attrs = append(attrs, slog.Duration("took", time.Since(start)),
			slog.Bool("is_error", err != nil || (res != nil && res.IsError)))
		s.log.LogAttrs(ctx, slog.LevelInfo, "tool call", attrs...)
		return res, err
	}
}

// refuseBody makes the server answer without reading the request's body
// and close the connection after the answer. (net/http would otherwise read
// up to 256 KiB of an unread body before reusing the connection, at the
// pace a slow client sends it.)
func refuseBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// orNone shows an empty setting as "none".
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// authorize is the tools' Options.Authorize: a caller's access must cover
// the tool's; the refusal names the scope that would.
func (s *Sidecar) authorize(ctx context.Context, tool string, need mcpadapter.Access) error {
	c, ok := mcpadapter.CallerFrom(ctx)
	if !ok || c.Access >= need {
		return nil
	}
	names := s.cfg.scopeNames()
	scope := map[mcpadapter.Access]string{mcpadapter.AccessRead: names.Read, mcpadapter.AccessWrite: names.Write,
		mcpadapter.AccessAdmin: names.Admin}[need]
	has := "none"
	if len(c.Scopes) > 0 {
		has = strings.Join(c.Scopes, " ")
	}
	return fmt.Errorf("%w: %s needs the %s scope (%s access), and this token's scopes are: %s",
		mcpadapter.ErrForbidden, tool, scope, need, has)
}
