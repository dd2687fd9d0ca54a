package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// A keySet is the issuer's JWKS, cached. It implements go-oidc's KeySet.
type keySet struct {
	url    string
	cfg    *Config
	algs   []jose.SignatureAlgorithm
	flight singleflight.Group

	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched time.Time // of the last successful fetch
	tried   time.Time // of the last fetch, successful or not
	gen     uint64    // counts successful fetches
}

// generation returns the number of successful fetches so far: a result
// verified under an older generation may rest on a key since withdrawn.
func (ks *keySet) generation() uint64 {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.gen
}

func newKeySet(url string, cfg *Config) *keySet {
	ks := &keySet{url: url, cfg: cfg}
	for _, a := range cfg.Algorithms {
		ks.algs = append(ks.algs, jose.SignatureAlgorithm(a))
	}
	return ks
}

// errUnknownKey is the error for a token signed by no key of the JWKS.
var errUnknownKey = errors.New("signed by a key the issuer does not publish")

// VerifySignature checks jwt's signature with the issuer's keys and returns
// its payload.
func (ks *keySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	jws, err := jose.ParseSigned(jwt, ks.algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("not signed exactly once")
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, refreshed, err := ks.keysFor(ctx, kid, false)
	if err != nil {
		return nil, err
	}
	if p, ok := verifyWith(jws, keys, kid); ok {
		return p, nil
	}
	if !refreshed && kid == "" {
		// No key id: the signature may be by a new key; look once more.
		if keys, refreshed, err = ks.keysFor(ctx, kid, true); err != nil {
			return nil, err
		}
		if p, ok := verifyWith(jws, keys, kid); ok && refreshed {
			return p, nil
		}
	}
	return nil, errUnknownKey
}

// verifyWith tries the public signing keys of keys that match kid.
func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey, kid string) ([]byte, bool) {
	for i := range keys {
		k := &keys[i]
		if kid != "" && k.KeyID != kid {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Key.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue // a symmetric or private key has no place in a JWKS
		}
		if p, err := jws.Verify(k); err == nil {
			return p, true
		}
	}
	return nil, false
}

// keysFor returns the keys to verify a signature by key kid with: the
// cached keys while they are fresh and hold kid, otherwise the JWKS fetched
// again (unless the last fetch is younger than MinRefreshInterval). force
// asks for a fetch whatever the cache holds, within the same limit.
func (ks *keySet) keysFor(ctx context.Context, kid string, force bool) (keys []jose.JSONWebKey, refreshed bool, _ error) {
	ks.mu.Lock()
	keys = ks.keys
	now := ks.cfg.Now()
	fresh := !ks.fetched.IsZero() && now.Sub(ks.fetched) < ks.cfg.MaxKeyAge
	known := kid == "" && len(keys) > 0
	for i := range keys {
		if keys[i].KeyID == kid {
			known = true
		}
	}
	mayFetch := ks.tried.IsZero() || now.Sub(ks.tried) >= ks.cfg.MinRefreshInterval
	ks.mu.Unlock()
	if fresh && known && !force {
		return keys, false, nil
	}
	if !mayFetch {
		if fresh || len(keys) > 0 {
			return keys, false, nil
		}
		return nil, false, errors.New("the issuer's keys could not be fetched recently; try again later")
	}
	ch := ks.flight.DoChan("jwks", func() (any, error) { return ks.fetch() })
	select {
	case <-ctx.Done():
		return nil, false, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			if len(keys) > 0 {
				return keys, false, nil // keep verifying with what we had
			}
			return nil, false, r.Err
		}
		return r.Val.([]jose.JSONWebKey), true, nil
	}
}

// fetch gets the JWKS and caches it.
func (ks *keySet) fetch() ([]jose.JSONWebKey, error) {
	ks.mu.Lock()
	ks.tried = ks.cfg.Now()
	ks.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), DefaultHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's keys: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the issuer's keys: %s", resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("the issuer's JWKS cannot be read: %v", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) == nil { // a key of a type go-jose does not know is skipped
			keys = append(keys, k)
		}
	}
	ks.mu.Lock()
	ks.keys, ks.fetched = keys, ks.cfg.Now()
	ks.gen++
	ks.mu.Unlock()
	return keys, nil
}
