package state

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
)

// Encryption at rest (docs/encryption.md).
//
// When Options.Encryption is set, the gate (gate.go), the one choke point
// between the portable code and the driver, seals what a record or an
// event carries of the caller's data before any driver sees it, and opens
// it again on the way back: the values of key-value entries (k/), step
// outputs and checkpoints (o/), session contexts (s/), the results of Once
// (e/) and the payloads of history events other than the run and lease
// transitions (which hold only the statuses, agents and fences the run and
// lease records keep in clear). Keys, ids, tags, statuses, revisions,
// writers and times stay in clear, so that listing, discovery, claims and
// the drivers' native fast paths keep working.
//
// A sealed value is an envelope: a magic prefix that no JSON value starts
// with, the kind of binding, the subject whose keys sealed it (or none:
// the namespace's), then the Cipher's ciphertext. The associated data
// binds the ciphertext to its namespace, its kind, its subject and its
// record key (for an event, its key and op), so that a ciphertext copied
// to another record, event or namespace fails to open. A record under a
// sealed prefix whose value is not an envelope fails to read with
// ErrNotEncrypted: the store never returns plaintext it did not expect.
//
// This package does no cryptography itself: the Cipher does (package
// encryption, over tink-go), so that a program that does not encrypt does
// not link it.

// Sentinel errors of encryption at rest.
var (
	// ErrNotEncrypted: a record or history event that must be encrypted
	// (encryption is on) was found in plaintext. The store refuses to
	// return it (fail closed).
	ErrNotEncrypted = errors.New("stored value is not encrypted")
	// ErrDecrypt: a sealed value failed to authenticate: it was altered,
	// moved from another record, event or namespace, or its key is gone.
	ErrDecrypt = errors.New("stored value failed to decrypt")
	// ErrErased: the value belonged to a subject (WithSubject) or a
	// namespace whose keys were destroyed by an erasure.
	ErrErased = errors.New("erased")
	// ErrKeyInUse: RetireKey was refused because records or history
	// events are still sealed with the key; a *KeyInUseError says how many.
	ErrKeyInUse = errors.New("key still in use")
	// ErrNoEncryption: the call needs encryption at rest, which the store
	// was not configured with (Options.Encryption).
	ErrNoEncryption = errors.New("encryption at rest is not configured")
)

// Encryption is what Options.Encryption holds: something that makes the
// Cipher of a store, given the table the store keeps its wrapped data key
// sets in. Package encryption provides one (encryption.Open with a key
// URL).
type Encryption interface {
	// Bind returns the Cipher of one store, which keeps its wrapped data
	// key sets in table unless the Encryption was given a table of its
	// own. It is called once, by New.
	Bind(table KeyTable) (Cipher, error)
}

// A KeyScope names one data key set: a namespace's, or the one of a
// subject (WithSubject) in a namespace.
type KeyScope struct {
	Namespace string
	// Subject is "" for the namespace's own key set.
	Subject string
}

// Cipher seals and opens the values a store writes and reads, with one
// data key set per KeyScope that it creates on first use, and manages
// those key sets. Its methods are safe for concurrent use. Package
// encryption implements it with tink-go AEAD key sets (AES-256-GCM)
// wrapped by a key-encryption key.
type Cipher interface {
	// Seal encrypts plaintext with the primary key of scope's key set,
	// authenticating aad with it.
	Seal(ctx context.Context, scope KeyScope, plaintext, aad []byte) ([]byte, error)
	// Open decrypts a ciphertext Seal made for scope with the same aad.
	// It returns an error matching ErrErased when scope's key set was
	// destroyed, ErrDecrypt when the ciphertext does not authenticate.
	Open(ctx context.Context, scope KeyScope, ciphertext, aad []byte) ([]byte, error)
	// Prepare makes scope's key set ready for Seal and Open without a call
	// to the key table: loaded and, when create is set, created if absent.
	// The store calls it before a driver's read-modify-write, during which
	// the key table (the same backend) must not be called.
	Prepare(ctx context.Context, scope KeyScope, create bool) error
	// KeyID returns the id of the key a ciphertext was sealed with.
	KeyID(ciphertext []byte) (uint32, bool)
	// Keys lists the keys of scope's key set (none when it has none yet).
	Keys(ctx context.Context, scope KeyScope) ([]KeyInfo, error)
	// RotateKey adds a new key to scope's key set and makes it the
	// primary: new writes use it at once, older keys keep decrypting.
	RotateKey(ctx context.Context, scope KeyScope) (KeyInfo, error)
	// RetireKey deletes key id from scope's key set; what it sealed can no
	// longer be read. The primary key cannot be retired.
	RetireKey(ctx context.Context, scope KeyScope, id uint32) error
	// DestroyKeys destroys scope's key set (crypto-shredding): what it
	// sealed can no longer be read, by this store or from any copy. For a
	// scope without a Subject, it destroys the namespace's key set and
	// every subject's key set of the namespace.
	DestroyKeys(ctx context.Context, scope KeyScope) error
}

// KeyInfo describes one key of a data key set.
type KeyInfo struct {
	// ID is the key's id, as Keys lists it and RetireKey takes it.
	ID uint32
	// Primary is set on the key new writes are sealed with.
	Primary bool
	// Records and Events count the records and history events sealed with
	// the key (Store.Keys fills them in; a Cipher leaves them zero).
	Records int64
	Events  int64
}

// A KeyInUseError reports a RetireKey refused because the key still seals
// records or history events. It matches ErrKeyInUse.
type KeyInUseError struct {
	ID      uint32
	Records int64
	Events  int64
}

// Error implements error.
func (e *KeyInUseError) Error() string {
	return fmt.Sprintf("key %d still seals %d records and %d history events (run Reencrypt, and let history age out)", e.ID, e.Records, e.Events)
}

// Is makes a KeyInUseError match ErrKeyInUse.
func (e *KeyInUseError) Is(target error) bool { return target == ErrKeyInUse }

// KeyTable stores the wrapped data key sets of a Cipher: small named
// values written with compare-and-set, so that replicas racing to create
// or rotate a key set agree on one. New gives a Cipher the table in the
// store's own backend (namespace KeysNamespace); DriverKeyTable makes one
// in another backend, to keep the keys out of the data's backups.
type KeyTable interface {
	// Get returns the value stored under name and its version, or an
	// error matching ErrNotFound.
	Get(ctx context.Context, name string) (value []byte, version int64, err error)
	// Put stores value under name if its current version is ifVersion (0:
	// if it is absent) and reports whether it did.
	Put(ctx context.Context, name string, value []byte, ifVersion int64) (bool, error)
	// Delete removes name if its current version is ifVersion (0: any)
	// and reports whether it did.
	Delete(ctx context.Context, name string, ifVersion int64) (bool, error)
	// List returns the names that start with prefix, in byte order.
	List(ctx context.Context, prefix string) ([]string, error)
}

// KeysNamespace is the namespace of the store's backend that keeps the
// wrapped data key sets when encryption is on (unless the Encryption has
// a table of its own). No Store can be opened in it.
const KeysNamespace = "_state.keys"

// keyTablePrefix starts the records of a key table.
const keyTablePrefix = "x/"

// DriverKeyTable returns a KeyTable kept in namespace KeysNamespace of d,
// for an Encryption that keeps its keys in another backend than the data
// (encryption.Config.Table). d's calls are not traced; the caller closes
// d.
func DriverKeyTable(d backend.Driver) KeyTable { return driverTable{d} }

// driverTable is a KeyTable in a driver: one record per name.
type driverTable struct{ d backend.Driver }

func (t driverTable) Get(ctx context.Context, name string) ([]byte, int64, error) {
	if err := ctx.Err(); err != nil { // no driver call with an ended context
		return nil, 0, err
	}
	r, err := t.d.Get(ctx, KeysNamespace, keyTablePrefix+name, time.Time{})
	if err != nil {
		return nil, 0, err
	}
	return r.Value, r.Revision, nil
}

func (t driverTable) Put(ctx context.Context, name string, value []byte, ifVersion int64) (bool, error) {
	if err := ctx.Err(); err != nil { // no driver call with an ended context
		return false, err
	}
	res, err := t.d.Commit(ctx, &backend.Txn{NS: KeysNamespace,
		If:   []backend.Cond{{Key: keyTablePrefix + name, Revision: ifVersion}},
		Then: []backend.Op{{Kind: backend.OpPut, Key: keyTablePrefix + name, Value: value, Time: time.Now().UTC().Truncate(time.Millisecond)}}})
	return err == nil && res.Committed, err
}

func (t driverTable) Delete(ctx context.Context, name string, ifVersion int64) (bool, error) {
	if err := ctx.Err(); err != nil { // no driver call with an ended context
		return false, err
	}
	txn := &backend.Txn{NS: KeysNamespace, Then: []backend.Op{{Kind: backend.OpDelete, Key: keyTablePrefix + name}}}
	if ifVersion != 0 {
		txn.If = []backend.Cond{{Key: keyTablePrefix + name, Revision: ifVersion}}
	}
	res, err := t.d.Commit(ctx, txn)
	return err == nil && res.Committed, err
}

func (t driverTable) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil { // no driver call with an ended context
		return nil, err
	}
	var names []string
	after := ""
	for {
		recs, err := t.d.List(ctx, &backend.ListQuery{NS: KeysNamespace, Prefix: keyTablePrefix + prefix, After: after, Limit: 1000, KeysOnly: true})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			names = append(names, strings.TrimPrefix(r.Key, keyTablePrefix))
		}
		if len(recs) < 1000 {
			return names, nil
		}
		after = recs[len(recs)-1].Key
	}
}

// sealMagic starts every sealed value: a NUL byte, which starts no JSON
// value and no decimal counter, then "se" and the format's version.
const sealMagic = "\x00se1"

// The kinds of binding of a sealed value (the byte after sealMagic).
const (
	kindRecord = 'r' // bound to its record's key
	kindValue  = 'v' // an event's Value, bound to the event's key and op
	kindPrev   = 'p' // an event's Prev, bound to the event's key and op
)

// sealedPrefixes are the key prefixes of the records whose values are
// sealed: key-value entries, step outputs, sessions and effects.
var sealedPrefixes = [...]string{"k/", "o/", "s/", "e/"}

// sealedKey reports whether the value of record key is sealed.
func sealedKey(key string) bool {
	if len(key) < 2 || key[1] != '/' {
		return false
	}
	for _, p := range sealedPrefixes {
		if key[0] == p[0] {
			return true
		}
	}
	return false
}

// sealedOp reports whether the payloads of events of op are sealed: every
// op but the run and lease transitions (which drivers append natively, in
// clear, and which carry what the run and lease records keep in clear),
// the erasure tombstones and the key management events.
func sealedOp(op string) bool {
	return !strings.HasPrefix(op, "workflow.") && !strings.HasPrefix(op, "lease.") &&
		!strings.HasPrefix(op, "erase.") && !strings.HasPrefix(op, "keys.")
}

// isSealed reports whether b is a sealed value.
func isSealed(b []byte) bool {
	return len(b) > len(sealMagic) && string(b[:len(sealMagic)]) == sealMagic
}

// aad returns the associated data of a value of kind, in namespace ns,
// for subject, at record key or event key (with op for an event): each
// part length-prefixed so that no two bindings give the same bytes.
func aad(kind byte, ns, subject, key, op string) []byte {
	b := make([]byte, 0, 16+len(ns)+len(subject)+len(key)+len(op))
	b = append(b, "state.v1"...)
	b = append(b, kind)
	for _, s := range [...]string{ns, subject, key, op} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// envelope is a parsed sealed value.
type envelope struct {
	kind    byte
	subject string
	ct      []byte
}

// parseEnvelope parses a sealed value; ok is false when b is not one.
func parseEnvelope(b []byte) (envelope, bool) {
	if !isSealed(b) || len(b) < len(sealMagic)+2 {
		return envelope{}, false
	}
	e := envelope{kind: b[len(sealMagic)]}
	rest := b[len(sealMagic)+1:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return envelope{}, false
	}
	e.subject = string(rest[w : w+int(n)])
	e.ct = rest[w+int(n):]
	return e, true
}

// sealer seals and opens values at the gate with a store's Cipher.
type sealer struct{ c Cipher }

// seal seals plaintext as a value of kind for subject in ns at key (and
// op, for an event).
func (s *sealer) seal(ctx context.Context, kind byte, ns, subject, key, op string, plaintext []byte) ([]byte, error) {
	ct, err := s.c.Seal(ctx, KeyScope{Namespace: ns, Subject: subject}, plaintext, aad(kind, ns, subject, key, op))
	if err != nil {
		return nil, fmt.Errorf("sealing %q: %w", key, err)
	}
	b := make([]byte, 0, len(sealMagic)+2+len(subject)+len(ct))
	b = append(b, sealMagic...)
	b = append(b, kind)
	b = binary.AppendUvarint(b, uint64(len(subject)))
	b = append(b, subject...)
	return append(b, ct...), nil
}

// openRecord opens the value of record key in ns.
func (s *sealer) openRecord(ctx context.Context, ns, key string, v []byte) ([]byte, error) {
	e, ok := parseEnvelope(v)
	if !ok {
		return nil, fmt.Errorf("record %q: %w", key, ErrNotEncrypted)
	}
	if e.kind != kindRecord {
		return nil, fmt.Errorf("record %q: sealed as another kind: %w", key, ErrDecrypt)
	}
	pt, err := s.c.Open(ctx, KeyScope{Namespace: ns, Subject: e.subject}, e.ct, aad(kindRecord, ns, e.subject, key, ""))
	if err != nil {
		return nil, fmt.Errorf("record %q: %w", key, err)
	}
	return pt, nil
}

// openPayload opens the Value (kind kindValue) or Prev (kindPrev) of an
// event. An event of a key-value op may carry the sealed value of its
// entry's record as it is (a Set's event shares its record's ciphertext;
// a driver fills Prev from the record), which is bound to the record.
func (s *sealer) openPayload(ctx context.Context, ns string, ev *backend.Event, kind byte, v []byte) ([]byte, error) {
	e, ok := parseEnvelope(v)
	if !ok {
		return nil, fmt.Errorf("history event %d: %w", ev.ID, ErrNotEncrypted)
	}
	var a []byte
	switch {
	case e.kind == kind:
		a = aad(kind, ns, e.subject, ev.Key, ev.Op)
	case e.kind == kindRecord && strings.HasPrefix(ev.Op, "kv."):
		a = aad(kindRecord, ns, e.subject, "k/"+ev.Key, "")
	default:
		return nil, fmt.Errorf("history event %d: sealed as another kind: %w", ev.ID, ErrDecrypt)
	}
	pt, err := s.c.Open(ctx, KeyScope{Namespace: ns, Subject: e.subject}, e.ct, a)
	if err != nil {
		return nil, fmt.Errorf("history event %d: %w", ev.ID, err)
	}
	return pt, nil
}
