// Package encryption encrypts a state.Store at rest with tink-go AEAD key
// sets (AES-256-GCM): one data key set per namespace, and one per subject
// (state.WithSubject) within it, each stored wrapped by a key-encryption
// key (KEK) in a state.KeyTable, by default a reserved namespace of the
// store's own backend, so that every replica of a store shares them.
//
// Use it through state.Options:
//
//	enc, err := encryption.Open(ctx, os.Getenv("STATE_ENCRYPTION_KEY_URL"))
//	st, err := state.DefaultURLMux().Open(ctx, "sqlite:///var/lib/state.db", &state.Options{Encryption: enc})
//
// The KEK is chosen by URL (OpenKEK):
//
//	base64key://<base64 of 32 bytes>                       a local AES-256-GCM key
//	file:///abs/path/kek                                   a local key in a file (base64, or 32 raw bytes)
//	vault://host:8200/transit/keys/<name>                  HashiCorp Vault transit (token: VAULT_TOKEN);
//	vaults://... for https
//	gcpkms://projects/<p>/locations/<l>/keyRings/<r>/cryptoKeys/<k>   Google Cloud KMS
//	awskms://<key id or ARN>?region=<region>               AWS KMS (aws-sdk-go-v2)
//
// Rotation (state.Store.RotateKey) adds a new primary key to a namespace's
// key set: new writes use it at once, older keys keep decrypting, and
// state.Store.Reencrypt moves old records forward so that the old key can
// be retired (state.Store.RetireKey). Erasing a namespace or a subject
// destroys its key set (crypto-shredding). docs/encryption.md says exactly
// what is and is not encrypted, and the residual risks.
//
// Package state does not import this package (nor tink-go): a program
// that does not encrypt does not link them.
package encryption
