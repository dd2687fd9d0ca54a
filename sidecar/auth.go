package sidecar

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/statesidecar/state/mcpadapter"
)

// A Token is a bearer token and the namespace its requests work in. An empty
// Namespace means the store's default namespace.
type Token struct {
	Secret    string
	Namespace string
}

// String hides the secret, so that a Token can be logged.
func (t Token) String() string {
	ns := t.Namespace
	if ns == "" {
		ns = "(default)"
	}
	return "token(" + ns + ")"
}

// ParseTokens parses SIDECAR_AUTH_TOKENS: comma-separated "token" or
// "token:namespace" items. Blank items are skipped; a token may itself
// contain ':' (the namespace follows the last one, and namespaces cannot
// contain ':'). A token given twice is an error.
func ParseTokens(s string) ([]Token, error) {
	var out []Token
	seen := map[string]bool{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		t := Token{Secret: item}
		if i := strings.LastIndexByte(item, ':'); i >= 0 {
			t.Secret, t.Namespace = strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
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

// An authenticator checks bearer tokens. It compares digests of the tokens
// in constant time, so neither a token's content nor its length leaks
// through timing.
type authenticator struct {
	digests    [][sha256.Size]byte
	namespaces []string
	onFailure  func()
}

// newAuthenticator returns an authenticator for tokens; onFailure, if not
// nil, is called for every rejected request (for metrics).
func newAuthenticator(tokens []Token, onFailure func()) *authenticator {
	a := &authenticator{onFailure: onFailure}
	for _, t := range tokens {
		a.digests = append(a.digests, sha256.Sum256([]byte(t.Secret)))
		a.namespaces = append(a.namespaces, t.Namespace)
	}
	return a
}

// Errors of authenticate.
var (
	errNoToken  = errors.New("missing bearer token")
	errBadToken = errors.New("invalid bearer token")
)

// authenticate returns the namespace of the request's bearer token ("" for
// the default namespace), or errNoToken or errBadToken.
func (a *authenticator) authenticate(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", errNoToken
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := -1
	for i := range a.digests { // no early exit: every request costs the same
		if subtle.ConstantTimeCompare(d[:], a.digests[i][:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", errBadToken
	}
	return a.namespaces[match], nil
}

// wrap returns next behind bearer authentication: a request without a valid
// token gets 401 with a WWW-Authenticate header, from its headers alone: the
// connection is closed rather than its body read, so that an
// unauthenticated client cannot hold the server with a slow body. A valid
// one reaches next with its token's namespace in the context
// (mcpadapter.WithNamespace).
func (a *authenticator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ns, err := a.authenticate(r)
		if err != nil {
			if a.onFailure != nil {
				a.onFailure()
			}
			challenge := `Bearer realm="mcp-state-sidecar"`
			if errors.Is(err, errBadToken) {
				challenge += `, error="invalid_token", error_description="unknown bearer token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			refuseBody(w)
			http.Error(w, "401 unauthorized: "+err.Error(), http.StatusUnauthorized)
			return
		}
		if ns != "" {
			r = r.WithContext(mcpadapter.WithNamespace(r.Context(), ns))
		}
		next.ServeHTTP(w, r)
	})
}

// refuseBody makes the server answer without reading the request's body
// and close the connection after the answer. (net/http would otherwise read
// up to 256 KiB of an unread body before reusing the connection, at the
// pace a slow client sends it.)
func refuseBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
