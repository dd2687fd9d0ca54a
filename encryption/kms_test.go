package encryption_test

// The KMS key-encryption keys against fakes of their real HTTP APIs (no
// real Vault, Google Cloud or AWS is reachable from the tests): each fake
// answers the documented requests, checks the credentials the client must
// send, and encrypts with a key of its own.

import (
	"context"
	"crypto/aes"
	gocipher "crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/encryption"
)

// fakeKeys encrypts for a fake KMS: one AES-256-GCM key per key name.
type fakeKeys struct {
	mu    sync.Mutex
	keys  map[string]gocipher.AEAD
	calls atomic.Int64
}

func (f *fakeKeys) aead(name string) gocipher.AEAD {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]gocipher.AEAD{}
	}
	if a, ok := f.keys[name]; ok {
		return a
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	b, _ := aes.NewCipher(k)
	a, _ := gocipher.NewGCM(b)
	f.keys[name] = a
	return a
}

func (f *fakeKeys) encrypt(name string, pt, aad []byte) []byte {
	f.calls.Add(1)
	a := f.aead(name)
	nonce := make([]byte, a.NonceSize())
	_, _ = rand.Read(nonce)
	return a.Seal(nonce, nonce, pt, aad)
}

func (f *fakeKeys) decrypt(name string, ct, aad []byte) ([]byte, error) {
	f.calls.Add(1)
	a := f.aead(name)
	if len(ct) < a.NonceSize() {
		return nil, errors.New("short ciphertext")
	}
	return a.Open(nil, ct[:a.NonceSize()], ct[a.NonceSize():], aad)
}

func b64(s string) []byte { b, _ := base64.StdEncoding.DecodeString(s); return b }

// fakeVault serves Vault's transit API: POST /v1/<mount>/encrypt/<name>
// and /v1/<mount>/decrypt/<name>, authenticated by X-Vault-Token.
func fakeVault(t *testing.T, token string) (*httptest.Server, *fakeKeys) {
	keys := &fakeKeys{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, msg string) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]any{"errors": []string{msg}})
		}
		if r.Header.Get("X-Vault-Token") != token {
			fail(http.StatusForbidden, "permission denied")
			return
		}
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
		if r.Method != http.MethodPost || len(parts) != 3 || parts[0] != "transit" {
			fail(http.StatusNotFound, "no handler for route")
			return
		}
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		aad := b64(body["associated_data"])
		switch parts[1] {
		case "encrypt":
			ct := keys.encrypt(parts[2], b64(body["plaintext"]), aad)
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{
				"ciphertext": "vault:v1:" + base64.StdEncoding.EncodeToString(ct), "key_version": 1}})
		case "decrypt":
			pt, err := keys.decrypt(parts[2], b64(strings.TrimPrefix(body["ciphertext"], "vault:v1:")), aad)
			if err != nil {
				fail(http.StatusBadRequest, "cipher: message authentication failed")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"data": map[string]any{"plaintext": base64.StdEncoding.EncodeToString(pt)}})
		default:
			fail(http.StatusNotFound, "no handler for route")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, keys
}

// fakeGCP serves Cloud KMS's REST API: POST /v1/<key name>:encrypt and
// :decrypt, authenticated by a bearer token.
func fakeGCP(t *testing.T, token string) (*httptest.Server, *fakeKeys) {
	keys := &fakeKeys{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail := func(code int, status, msg string) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "status": status, "message": msg}})
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			fail(http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials.")
			return
		}
		name, op, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/"), ":")
		if r.Method != http.MethodPost || !ok || !strings.Contains(name, "/cryptoKeys/") {
			fail(http.StatusNotFound, "NOT_FOUND", "not found")
			return
		}
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		aad := b64(body["additionalAuthenticatedData"])
		switch op {
		case "encrypt":
			ct := keys.encrypt(name, b64(body["plaintext"]), aad)
			_ = json.NewEncoder(w).Encode(map[string]any{"name": name + "/cryptoKeyVersions/1", "ciphertext": base64.StdEncoding.EncodeToString(ct)})
		case "decrypt":
			pt, err := keys.decrypt(name, b64(body["ciphertext"]), aad)
			if err != nil {
				fail(http.StatusBadRequest, "INVALID_ARGUMENT", "Decryption failed: the ciphertext is invalid.")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"plaintext": base64.StdEncoding.EncodeToString(pt)})
		default:
			fail(http.StatusNotFound, "NOT_FOUND", "not found")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, keys
}

// fakeAWS serves AWS KMS's JSON 1.1 API (X-Amz-Target TrentService.Encrypt
// and .Decrypt), requiring a SigV4 signature by the expected access key.
func fakeAWS(t *testing.T, accessKey string) (*httptest.Server, *fakeKeys) {
	keys := &fakeKeys{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		fail := func(code int, typ, msg string) {
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(map[string]any{"__type": typ, "message": msg})
		}
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential="+accessKey+"/") || !strings.Contains(auth, "/kms/aws4_request") {
			fail(http.StatusBadRequest, "UnrecognizedClientException", "The security token included in the request is invalid.")
			return
		}
		var body struct {
			KeyID             string            `json:"KeyId"`
			Plaintext         []byte            `json:"Plaintext"`
			CiphertextBlob    []byte            `json:"CiphertextBlob"`
			EncryptionContext map[string]string `json:"EncryptionContext"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		ec, _ := json.Marshal(body.EncryptionContext) // Go sorts map keys: a canonical form
		switch r.Header.Get("X-Amz-Target") {
		case "TrentService.Encrypt":
			ct := keys.encrypt(body.KeyID, body.Plaintext, ec)
			_ = json.NewEncoder(w).Encode(map[string]any{"CiphertextBlob": append([]byte(body.KeyID+"|"), ct...),
				"KeyId": "arn:aws:kms:eu-west-1:111122223333:key/" + body.KeyID, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
		case "TrentService.Decrypt":
			id, ct, ok := strings.Cut(string(body.CiphertextBlob), "|")
			if !ok || (body.KeyID != "" && body.KeyID != id) {
				fail(http.StatusBadRequest, "IncorrectKeyException", "The key ID in the request does not identify the key that encrypted the ciphertext.")
				return
			}
			pt, err := keys.decrypt(id, []byte(ct), ec)
			if err != nil {
				fail(http.StatusBadRequest, "InvalidCiphertextException", "")
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"Plaintext": pt, "KeyId": "arn:aws:kms:eu-west-1:111122223333:key/" + id,
				"EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
		default:
			fail(http.StatusBadRequest, "UnknownOperationException", "")
		}
	}))
	t.Cleanup(srv.Close)
	return srv, keys
}

// roundTrip writes through a store whose KEK is keyURL, then reads back
// through a second store, with its own Keyring from the same URL, over the
// same file: the key set it reads was unwrapped by the KMS.
func roundTrip(t *testing.T, keyURL string) *state.Store {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kms.db")
	st, _ := openSQLite(t, path, keyURL, nil)
	if _, err := st.Set(ctx, "k", secretValue); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, _ := openSQLite(t, path, keyURL, nil)
	if e, err := st2.Get(ctx, "k"); err != nil || !strings.Contains(string(e.Value), secretValue) {
		t.Fatalf("Get through a second store = %s, %v", e.Value, err)
	}
	return st2
}

// refused opens a store over the file of st with KEK keyURL and checks
// that it cannot read st's entry.
func refused(t *testing.T, path, keyURL string) {
	t.Helper()
	ctx := context.Background()
	d, err := sqlitestate.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encryption.Open(ctx, keyURL)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Get(ctx, "k"); err == nil {
		t.Errorf("a store with KEK %s read the entry", keyURL)
	}
}

func TestVaultKEK(t *testing.T) {
	srv, keys := fakeVault(t, "s.right")
	t.Setenv("VAULT_TOKEN", "s.right")
	keyURL := "vault://" + strings.TrimPrefix(srv.URL, "http://") + "/transit/keys/state"
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kms.db")
	st, _ := openSQLite(t, path, keyURL, nil)
	if _, err := st.Set(ctx, "k", secretValue); err != nil {
		t.Fatal(err)
	}
	if keys.calls.Load() == 0 {
		t.Fatal("Vault was never called")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, _ := openSQLite(t, path, keyURL, nil)
	if e, err := st2.Get(ctx, "k"); err != nil || !strings.Contains(string(e.Value), secretValue) {
		t.Fatalf("Get through a second store = %s, %v", e.Value, err)
	}
	_ = st2.Close()
	refused(t, path, "vault://"+strings.TrimPrefix(srv.URL, "http://")+"/transit/keys/other")
	t.Setenv("VAULT_TOKEN", "s.wrong")
	refused(t, path, keyURL)
	t.Setenv("VAULT_TOKEN", "")
	if _, err := encryption.OpenKEK(ctx, keyURL); !errors.Is(err, encryption.ErrKeyURL) {
		t.Errorf("OpenKEK without VAULT_TOKEN: %v", err)
	}
}

func TestGCPKMSKEK(t *testing.T) {
	srv, keys := fakeGCP(t, "ya29.right")
	t.Setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.right")
	key := "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/state?endpoint=" + srv.URL
	st := roundTrip(t, key)
	if keys.calls.Load() < 2 {
		t.Fatalf("Cloud KMS was called %d times, want an encrypt and a decrypt", keys.calls.Load())
	}
	_ = st.Close()
	path := filepath.Join(t.TempDir(), "kms.db")
	st, _ = openSQLite(t, path, key, nil)
	if _, err := st.Set(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	refused(t, path, "gcpkms://projects/p/locations/global/keyRings/r/cryptoKeys/other?endpoint="+srv.URL)
	t.Setenv("GOOGLE_OAUTH_ACCESS_TOKEN", "ya29.wrong")
	refused(t, path, key)
	if _, err := encryption.OpenKEK(context.Background(), "gcpkms://projects/p/keyRings/r"); !errors.Is(err, encryption.ErrKeyURL) {
		t.Errorf("OpenKEK of a malformed key name: %v", err)
	}
}

func TestAWSKMSKEK(t *testing.T) {
	srv, keys := fakeAWS(t, "AKIDRIGHT")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDRIGHT")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	key := "awskms://1234abcd-12ab-34cd-56ef-1234567890ab?region=eu-west-1&endpoint=" + srv.URL
	st := roundTrip(t, key)
	if keys.calls.Load() < 2 {
		t.Fatalf("AWS KMS was called %d times, want an encrypt and a decrypt", keys.calls.Load())
	}
	_ = st.Close()
	path := filepath.Join(t.TempDir(), "kms.db")
	st, _ = openSQLite(t, path, key, nil)
	if _, err := st.Set(context.Background(), "k", 1); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	refused(t, path, "awskms://other-key?region=eu-west-1&endpoint="+srv.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDWRONG")
	refused(t, path, key)
}
