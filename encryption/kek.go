package encryption

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/tink-crypto/tink-go/v2/aead/subtle"
	"github.com/tink-crypto/tink-go/v2/tink"
)

// ErrKeyURL is matched by the error of OpenKEK for a URL it cannot use.
var ErrKeyURL = errors.New("encryption: bad key URL")

// OpenKEK returns the key-encryption key keyURL names (see the package
// documentation for the forms). The error never repeats key material.
func OpenKEK(ctx context.Context, keyURL string) (tink.AEADWithContext, error) {
	scheme, rest, ok := strings.Cut(keyURL, "://")
	if !ok {
		return nil, fmt.Errorf("%w: STATE_ENCRYPTION_KEY_URL must be scheme://..., one of base64key, file, vault, vaults, gcpkms, awskms", ErrKeyURL)
	}
	switch scheme {
	case "base64key":
		return localKEK(rest, "base64key://")
	case "file":
		u, err := url.Parse(keyURL)
		if err != nil || u.Path == "" {
			return nil, fmt.Errorf("%w: file:// needs an absolute path, as file:///etc/state/kek", ErrKeyURL)
		}
		b, err := os.ReadFile(u.Path)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the key file: %w", ErrKeyURL, err)
		}
		if len(b) == 32 {
			return rawKEK(b)
		}
		return localKEK(strings.TrimSpace(string(b)), "the key file")
	case "vault", "vaults":
		return openVault(ctx, keyURL)
	case "gcpkms":
		return openGCPKMS(ctx, keyURL)
	case "awskms":
		return openAWSKMS(ctx, keyURL)
	}
	return nil, fmt.Errorf("%w: unknown scheme %q: use base64key, file, vault, vaults, gcpkms or awskms", ErrKeyURL, scheme)
}

// localKEK decodes a base64 (standard or URL alphabet, padded or not) key
// of 32 bytes.
func localKEK(s, where string) (tink.AEADWithContext, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("%w: %s must hold 32 bytes (AES-256), got %d", ErrKeyURL, where, len(b))
			}
			return rawKEK(b)
		}
	}
	return nil, fmt.Errorf("%w: %s is not base64", ErrKeyURL, where)
}

// rawKEK is an AES-256-GCM KEK from 32 bytes.
func rawKEK(key []byte) (tink.AEADWithContext, error) {
	a, err := subtle.NewAESGCM(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyURL, err)
	}
	return withContext{a}, nil
}

// withContext makes a tink.AEAD a tink.AEADWithContext.
type withContext struct{ a tink.AEAD }

func (w withContext) EncryptWithContext(_ context.Context, pt, aad []byte) ([]byte, error) {
	return w.a.Encrypt(pt, aad)
}

func (w withContext) DecryptWithContext(_ context.Context, ct, aad []byte) ([]byte, error) {
	return w.a.Decrypt(ct, aad)
}
