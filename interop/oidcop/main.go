// Command oidcop is a real OpenID provider for the sidecar's OAuth tests:
// the OpenID provider of github.com/zitadel/oidc/v3 (a certified library),
// in memory, issuing JWT access tokens by the client-credentials grant,
// with OIDC discovery and a JWKS endpoint, plus one test endpoint that
// rotates its signing key.
//
// It listens on 127.0.0.1 (port -addr, default any free one) and prints
// one line, "issuer <URL>", once it is serving. Clients are given as
// -client flags:
//
//	-client 'id|secret|subject|tenant|audience|scope1 scope2'
//
// A client may ask for any subset of its scopes (none asked: all of them);
// its tokens carry sub=subject, aud=audience, scope and, when tenant is not
// empty, the claim named by -tenant-claim (default "tenant").
//
// POST /test/rotate makes a new RS256 signing key the current one; the old
// public key stays in the JWKS unless the query has retire=1. It answers
// with the new key's id.
package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	tenantClaim := flag.String("tenant-claim", "tenant", "name of the claim that carries a client's tenant")
	lifetime := flag.Duration("lifetime", 5*time.Minute, "access token lifetime")
	var clients clientFlags
	flag.Var(&clients, "client", "a client: id|secret|subject|tenant|audience|scopes (repeatable)")
	flag.Parse()
	if len(clients) == 0 {
		log.Fatal("oidcop: no -client given")
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("oidcop: %v", err)
	}
	issuer := "http://" + ln.Addr().String()

	st, err := newStore(issuer, clients, *tenantClaim, *lifetime)
	if err != nil {
		log.Fatalf("oidcop: %v", err)
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:             sha256.Sum256([]byte("oidcop test provider")),
		AuthMethodPost:        true,
		GrantTypeRefreshToken: false,
	}, st, op.StaticIssuer(issuer), op.WithAllowInsecure(),
		op.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	if err != nil {
		log.Fatalf("oidcop: %v", err)
	}

	mux := http.NewServeMux()
	mux.HandleFunc("POST /test/rotate", func(w http.ResponseWriter, r *http.Request) {
		kid, err := st.keys.rotate(r.URL.Query().Get("retire") == "1")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, kid)
	})
	mux.Handle("/", provider)

	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	fmt.Printf("issuer %s\n", issuer)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("oidcop: %v", err)
	}
}

// A clientSpec is one -client flag.
type clientSpec struct {
	id, secret, subject, tenant, audience string
	scopes                                []string
}

type clientFlags []clientSpec

func (c *clientFlags) String() string { return fmt.Sprint(len(*c), " clients") }

func (c *clientFlags) Set(v string) error {
	f := strings.SplitN(v, "|", 6)
	if len(f) != 6 {
		return fmt.Errorf("client %q: want id|secret|subject|tenant|audience|scopes", v)
	}
	if f[0] == "" || f[1] == "" || f[2] == "" || f[4] == "" {
		return fmt.Errorf("client %q: id, secret, subject and audience must not be empty", v)
	}
	*c = append(*c, clientSpec{id: f[0], secret: f[1], subject: f[2], tenant: f[3], audience: f[4], scopes: strings.Fields(f[5])})
	return nil
}

// A store is the example in-memory storage of zitadel/oidc with our
// clients, claims and rotating keys.
type store struct {
	*storage.Storage
	clients     map[string]clientSpec
	tenantClaim string
	lifetime    time.Duration
	keys        *keyRing
}

func newStore(issuer string, clients []clientSpec, tenantClaim string, lifetime time.Duration) (*store, error) {
	kr := &keyRing{}
	if _, err := kr.rotate(false); err != nil {
		return nil, err
	}
	s := &store{Storage: storage.NewStorage(storage.NewUserStore(issuer)), clients: map[string]clientSpec{},
		tenantClaim: tenantClaim, lifetime: lifetime, keys: kr}
	for _, c := range clients {
		s.clients[c.id] = c
	}
	return s, nil
}

// ClientCredentials authenticates a client of the client-credentials grant.
func (s *store) ClientCredentials(_ context.Context, clientID, clientSecret string) (op.Client, error) {
	c, ok := s.clients[clientID]
	if !ok || c.secret != clientSecret {
		return nil, errors.New("wrong client id or secret")
	}
	return &client{spec: c}, nil
}

// ClientCredentialsTokenRequest says what a client's token carries.
func (s *store) ClientCredentialsTokenRequest(_ context.Context, clientID string, scopes []string) (op.TokenRequest, error) {
	c, ok := s.clients[clientID]
	if !ok {
		return nil, errors.New("unknown client")
	}
	granted := c.scopes
	if len(scopes) > 0 {
		granted = nil
		for _, sc := range scopes {
			if !slices.Contains(c.scopes, sc) {
				return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not allowed for this client", sc)
			}
			granted = append(granted, sc)
		}
	}
	return &oidc.JWTTokenRequest{Subject: c.subject, Audience: []string{c.audience}, Scopes: granted}, nil
}

// GetClientByClientID answers for our clients, then the example's.
func (s *store) GetClientByClientID(ctx context.Context, clientID string) (op.Client, error) {
	if c, ok := s.clients[clientID]; ok {
		return &client{spec: c}, nil
	}
	return s.Storage.GetClientByClientID(ctx, clientID)
}

// CreateAccessToken gives tokens the configured lifetime.
func (s *store) CreateAccessToken(_ context.Context, _ op.TokenRequest) (string, time.Time, error) {
	return rand.Text(), time.Now().Add(s.lifetime), nil
}

// GetPrivateClaimsFromScopes adds the scope claim and the tenant claim.
func (s *store) GetPrivateClaimsFromScopes(_ context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(scopes, " ")}
	if c, ok := s.clients[clientID]; ok && c.tenant != "" {
		claims[s.tenantClaim] = c.tenant
	}
	return claims, nil
}

// SigningKey is the ring's current key.
func (s *store) SigningKey(context.Context) (op.SigningKey, error) { return s.keys.current(), nil }

// SignatureAlgorithms is RS256 only.
func (s *store) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

// KeySet is every public key of the ring.
func (s *store) KeySet(context.Context) ([]op.Key, error) { return s.keys.public(), nil }

// A client is one of our client-credentials clients.
type client struct{ spec clientSpec }

func (c *client) GetID() string                    { return c.spec.id }
func (c *client) RedirectURIs() []string           { return nil }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) ApplicationType() op.ApplicationType {
	return op.ApplicationTypeWeb
}
func (c *client) AuthMethod() oidc.AuthMethod { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return nil
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeClientCredentials}
}
func (c *client) LoginURL(string) string               { return "" }
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *client) DevMode() bool                        { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) IsScopeAllowed(scope string) bool     { return slices.Contains(c.spec.scopes, scope) }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// A keyRing holds the signing keys: the last is current.
type keyRing struct {
	mu   sync.Mutex
	keys []*rsaKey
	n    int
}

type rsaKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *rsaKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *rsaKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *rsaKey) Key() any                                    { return k.key }
func (k *rsaKey) ID() string                                  { return k.id }
func (k *rsaKey) Use() string                                 { return "sig" }

type rsaPublic struct{ *rsaKey }

func (k rsaPublic) Key() any { return &k.key.PublicKey }

// rotate adds a new current key, dropping the others when retire is set,
// and returns its id.
func (r *keyRing) rotate(retire bool) (string, error) {
	pk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	k := &rsaKey{id: fmt.Sprintf("key-%d-%s", r.n, rand.Text()[:6]), key: pk}
	if retire {
		r.keys = nil
	}
	r.keys = append(r.keys, k)
	return k.id, nil
}

func (r *keyRing) current() op.SigningKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys[len(r.keys)-1]
}

func (r *keyRing) public() []op.Key {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]op.Key, len(r.keys))
	for i, k := range r.keys {
		out[i] = rsaPublic{k}
	}
	return out
}
