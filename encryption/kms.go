package encryption

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/tink"
)

// The KMS key-encryption keys. Each remote key wraps, per key set written,
// a fresh AES-256-GCM key that encrypts the key set locally with the
// associated data (tink's KMS envelope AEAD), so that a KMS is called once
// per key set stored or loaded, never per value.

// kmsTimeout bounds one call to a KMS.
const kmsTimeout = 30 * time.Second

// envelope returns the KEK that wraps each key set with a fresh local key
// which remote encrypts.
func envelope(remote tink.AEADWithContext) (tink.AEADWithContext, error) {
	e, err := aead.NewKMSEnvelopeAEADWithContext(aead.AES256GCMKeyTemplate(), remote)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// vaultKEK is a key of HashiCorp Vault's transit secrets engine, over its
// HTTP API (POST /v1/<mount>/encrypt/<name>, /decrypt/<name>).
type vaultKEK struct {
	base, mount, name, token string
	hc                       *http.Client
}

// openVault opens vault://host:port/<mount>/keys/<name> (vaults:// for
// https), with the token of VAULT_TOKEN.
func openVault(_ context.Context, keyURL string) (tink.AEADWithContext, error) {
	u, err := url.Parse(keyURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: vault URL: want vault://host:port/<mount>/keys/<name>", ErrKeyURL)
	}
	path := strings.Trim(u.Path, "/")
	i := strings.LastIndex(path, "/keys/")
	if i <= 0 || strings.Contains(path[i+len("/keys/"):], "/") || path[i+len("/keys/"):] == "" {
		return nil, fmt.Errorf("%w: vault URL path %q: want /<mount>/keys/<name>", ErrKeyURL, u.Path)
	}
	token := os.Getenv("VAULT_TOKEN")
	if token == "" {
		return nil, fmt.Errorf("%w: vault: VAULT_TOKEN is not set", ErrKeyURL)
	}
	scheme := "http"
	if u.Scheme == "vaults" {
		scheme = "https"
	}
	return envelope(&vaultKEK{base: scheme + "://" + u.Host, mount: path[:i], name: path[i+len("/keys/"):],
		token: token, hc: &http.Client{Timeout: kmsTimeout}})
}

func (v *vaultKEK) call(ctx context.Context, op string, body map[string]string) (map[string]any, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.base+"/v1/"+v.mount+"/"+op+"/"+url.PathEscape(v.name), bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Vault-Token", v.token)
	req.Header.Set("Content-Type", "application/json")
	var out struct {
		Data   map[string]any `json:"data"`
		Errors []string       `json:"errors"`
	}
	if err := doJSON(v.hc, req, &out); err != nil {
		return nil, fmt.Errorf("vault transit %s: %w (%s)", op, err, strings.Join(out.Errors, "; "))
	}
	return out.Data, nil
}

func (v *vaultKEK) EncryptWithContext(ctx context.Context, pt, aad []byte) ([]byte, error) {
	body := map[string]string{"plaintext": base64.StdEncoding.EncodeToString(pt)}
	if len(aad) > 0 {
		body["associated_data"] = base64.StdEncoding.EncodeToString(aad)
	}
	d, err := v.call(ctx, "encrypt", body)
	if err != nil {
		return nil, err
	}
	ct, _ := d["ciphertext"].(string)
	if !strings.HasPrefix(ct, "vault:") {
		return nil, errors.New("vault transit encrypt: no ciphertext in the answer")
	}
	return []byte(ct), nil
}

func (v *vaultKEK) DecryptWithContext(ctx context.Context, ct, aad []byte) ([]byte, error) {
	body := map[string]string{"ciphertext": string(ct)}
	if len(aad) > 0 {
		body["associated_data"] = base64.StdEncoding.EncodeToString(aad)
	}
	d, err := v.call(ctx, "decrypt", body)
	if err != nil {
		return nil, err
	}
	pt, _ := d["plaintext"].(string)
	return base64.StdEncoding.DecodeString(pt)
}

// gcpKEK is a Google Cloud KMS key, over its REST API
// (POST https://cloudkms.googleapis.com/v1/<name>:encrypt, :decrypt).
type gcpKEK struct {
	endpoint, name string
	token          func(ctx context.Context) (string, error)
	hc             *http.Client
}

// openGCPKMS opens gcpkms://projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>,
// authenticated with the access token of GOOGLE_OAUTH_ACCESS_TOKEN or,
// without it, one from the metadata server (on Google Cloud). An
// ?endpoint= parameter replaces https://cloudkms.googleapis.com.
func openGCPKMS(_ context.Context, keyURL string) (tink.AEADWithContext, error) {
	rest := strings.TrimPrefix(keyURL, "gcpkms://")
	name, query, _ := strings.Cut(rest, "?")
	parts := strings.Split(name, "/")
	if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "keyRings" || parts[6] != "cryptoKeys" {
		return nil, fmt.Errorf("%w: gcpkms URL: want gcpkms://projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>", ErrKeyURL)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: gcpkms URL query: %w", ErrKeyURL, err)
	}
	g := &gcpKEK{endpoint: "https://cloudkms.googleapis.com", name: name, hc: &http.Client{Timeout: kmsTimeout}}
	if e := q.Get("endpoint"); e != "" {
		g.endpoint = strings.TrimSuffix(e, "/")
	}
	if tok := os.Getenv("GOOGLE_OAUTH_ACCESS_TOKEN"); tok != "" {
		g.token = func(context.Context) (string, error) { return tok, nil }
	} else {
		g.token = metadataToken(g.hc)
	}
	return envelope(g)
}

// metadataToken returns an access token of the instance's service account
// from the Google Cloud metadata server.
func metadataToken(hc *http.Client) func(ctx context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			"http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token", nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Metadata-Flavor", "Google")
		var out struct {
			AccessToken string `json:"access_token"`
		}
		if err := doJSON(hc, req, &out); err != nil {
			return "", fmt.Errorf("gcpkms: no GOOGLE_OAUTH_ACCESS_TOKEN, and the metadata server: %w", err)
		}
		return out.AccessToken, nil
	}
}

func (g *gcpKEK) call(ctx context.Context, op string, body map[string]string, out any) error {
	tok, err := g.token(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.endpoint+"/v1/"+g.name+":"+op, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if err := doJSON(g.hc, req, out); err != nil {
		return fmt.Errorf("gcpkms %s: %w", op, err)
	}
	return nil
}

func (g *gcpKEK) EncryptWithContext(ctx context.Context, pt, aad []byte) ([]byte, error) {
	body := map[string]string{"plaintext": base64.StdEncoding.EncodeToString(pt)}
	if len(aad) > 0 {
		body["additionalAuthenticatedData"] = base64.StdEncoding.EncodeToString(aad)
	}
	var out struct {
		Ciphertext string `json:"ciphertext"`
	}
	if err := g.call(ctx, "encrypt", body, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.Ciphertext)
}

func (g *gcpKEK) DecryptWithContext(ctx context.Context, ct, aad []byte) ([]byte, error) {
	body := map[string]string{"ciphertext": base64.StdEncoding.EncodeToString(ct)}
	if len(aad) > 0 {
		body["additionalAuthenticatedData"] = base64.StdEncoding.EncodeToString(aad)
	}
	var out struct {
		Plaintext string `json:"plaintext"`
	}
	if err := g.call(ctx, "decrypt", body, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.Plaintext)
}

// doJSON sends req and decodes its JSON answer into out; an answer other
// than 2xx is an error naming the status (out still gets its body).
func doJSON(hc *http.Client, req *http.Request, out any) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	jerr := json.Unmarshal(b, out)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("HTTP %s", resp.Status)
	}
	return jerr
}

// awsKEK is an AWS KMS key, over aws-sdk-go-v2 (not tink's AWS module,
// which pulls the end-of-life v1 SDK).
type awsKEK struct {
	keyID string
	c     *kms.Client
}

// openAWSKMS opens awskms://<key id, alias/… or ARN>?region=<r>, with the
// SDK's default credential chain (environment, shared files, IAM role).
// An ?endpoint= parameter replaces the service's endpoint.
func openAWSKMS(ctx context.Context, keyURL string) (tink.AEADWithContext, error) {
	rest := strings.TrimPrefix(keyURL, "awskms://")
	keyID, query, _ := strings.Cut(rest, "?")
	if keyID == "" {
		return nil, fmt.Errorf("%w: awskms URL: want awskms://<key id or ARN>?region=<region>", ErrKeyURL)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("%w: awskms URL query: %w", ErrKeyURL, err)
	}
	region := q.Get("region")
	if region == "" && strings.HasPrefix(keyID, "arn:") {
		if f := strings.Split(keyID, ":"); len(f) > 3 {
			region = f[3]
		}
	}
	var opts []func(*awsconfig.LoadOptions) error
	if region != "" {
		opts = append(opts, awsconfig.WithRegion(region))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: awskms: loading the AWS configuration: %w", ErrKeyURL, err)
	}
	if cfg.Region == "" {
		return nil, fmt.Errorf("%w: awskms: no region (add ?region=, use an ARN, or set AWS_REGION)", ErrKeyURL)
	}
	c := kms.NewFromConfig(cfg, func(o *kms.Options) {
		if e := q.Get("endpoint"); e != "" {
			o.BaseEndpoint = aws.String(e)
		}
	})
	return envelope(&awsKEK{keyID: keyID, c: c})
}

// awsContext is the encryption context that carries associated data.
func awsContext(aad []byte) map[string]string {
	if len(aad) == 0 {
		return nil
	}
	return map[string]string{"state_aad": base64.StdEncoding.EncodeToString(aad)}
}

func (a *awsKEK) EncryptWithContext(ctx context.Context, pt, aad []byte) ([]byte, error) {
	out, err := a.c.Encrypt(ctx, &kms.EncryptInput{KeyId: aws.String(a.keyID), Plaintext: pt, EncryptionContext: awsContext(aad)})
	if err != nil {
		return nil, fmt.Errorf("awskms encrypt: %w", err)
	}
	return out.CiphertextBlob, nil
}

func (a *awsKEK) DecryptWithContext(ctx context.Context, ct, aad []byte) ([]byte, error) {
	out, err := a.c.Decrypt(ctx, &kms.DecryptInput{KeyId: aws.String(a.keyID), CiphertextBlob: ct, EncryptionContext: awsContext(aad)})
	if err != nil {
		return nil, fmt.Errorf("awskms decrypt: %w", err)
	}
	return out.Plaintext, nil
}
