package encryption

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/keyset"
	"github.com/tink-crypto/tink-go/v2/tink"
)

// DefaultRefreshInterval is how long a store uses a data key set it loaded
// before it reads it again from the key table, to follow a rotation or an
// erasure made by another replica.
const DefaultRefreshInterval = 30 * time.Second

// Config configures a Keyring.
type Config struct {
	// KEK wraps and unwraps the data key sets. Required; OpenKEK makes
	// one from a URL.
	KEK tink.AEADWithContext
	// Table keeps the wrapped data key sets. Nil means the store's own
	// backend (namespace state.KeysNamespace); state.DriverKeyTable makes
	// one in another backend, to keep the keys out of the data's backups.
	Table state.KeyTable
	// RefreshInterval is how long a loaded key set is used before it is
	// read again (default DefaultRefreshInterval).
	RefreshInterval time.Duration
	// PreviousKEKs unwrap key sets that KEK cannot, during a rotation of
	// the KEK itself: every replica is given the new KEK with the old one
	// here, Rewrap wraps every key set with the new one, then the old one
	// can go.
	PreviousKEKs []tink.AEADWithContext
	// Clock dates the demotion of a primary key, after which RetireKey
	// waits a RefreshInterval. Defaults to the process clock; tests set
	// the store's.
	Clock state.Clock
}

// Keyring is a state.Encryption: Options.Encryption takes it.
type Keyring struct{ cfg Config }

// New returns a Keyring with cfg. It fails when cfg.KEK is nil.
func New(cfg Config) (*Keyring, error) {
	if cfg.KEK == nil {
		return nil, errors.New("encryption: Config.KEK: must not be nil")
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = state.ClockFunc(time.Now)
	}
	return &Keyring{cfg: cfg}, nil
}

// Open returns a Keyring whose KEK is the one keyURL names (OpenKEK),
// which also unwraps with the KEKs of previousURLs (Config.PreviousKEKs).
func Open(ctx context.Context, keyURL string, previousURLs ...string) (*Keyring, error) {
	kek, err := OpenKEK(ctx, keyURL)
	if err != nil {
		return nil, err
	}
	cfg := Config{KEK: kek}
	for _, u := range previousURLs {
		p, err := OpenKEK(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		cfg.PreviousKEKs = append(cfg.PreviousKEKs, p)
	}
	return New(cfg)
}

// Bind implements state.Encryption: it returns the Cipher of one store.
func (k *Keyring) Bind(table state.KeyTable) (state.Cipher, error) {
	if k.cfg.Table != nil {
		table = k.cfg.Table
	}
	if table == nil {
		return nil, errors.New("encryption: no key table")
	}
	return k.bind(table), nil
}

func (k *Keyring) bind(table state.KeyTable) *cipher {
	return &cipher{kek: k.cfg.KEK, previous: k.cfg.PreviousKEKs, table: table, refresh: k.cfg.RefreshInterval,
		clock: k.cfg.Clock, sets: map[state.KeyScope]*loaded{}}
}

// Rewrap wraps with the Keyring's KEK every key set of table that a
// previous KEK (Config.PreviousKEKs) wrapped, and returns how many it
// rewrapped: the second step of a rotation of the KEK (docs/encryption.md).
// table is the store's (state.DriverKeyTable of its driver) or the
// Keyring's own Config.Table.
func (k *Keyring) Rewrap(ctx context.Context, table state.KeyTable) (int, error) {
	if k.cfg.Table != nil {
		table = k.cfg.Table
	}
	c := k.bind(table)
	names, err := table.List(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("encryption: listing the key sets: %w", err)
	}
	n := 0
	for _, name := range names {
		for {
			v, ver, err := table.Get(ctx, name)
			if errors.Is(err, state.ErrNotFound) {
				break
			}
			if err != nil {
				return n, fmt.Errorf("encryption: reading the key set of %q: %w", name, err)
			}
			var st stored
			if err := json.Unmarshal(v, &st); err != nil {
				return n, fmt.Errorf("encryption: the key set of %q: %w", name, err)
			}
			if len(st.Keyset) == 0 {
				break // a tombstone
			}
			if _, err := keyset.ReadWithContext(ctx, keyset.NewBinaryReader(bytes.NewReader(st.Keyset)), c.kek, kekAAD(name)); err == nil {
				break // wrapped by the KEK already
			}
			h, err := c.unwrap(ctx, name, st.Keyset)
			if err != nil {
				return n, err
			}
			l := &loaded{version: ver, erased: st.Erased, demoted: st.Demoted}
			if err := l.use(h); err != nil {
				return n, err
			}
			ok, err := c.writeName(ctx, name, l)
			if err != nil {
				return n, err
			}
			if ok {
				n++
				break
			}
		}
	}
	return n, nil
}

// cipher is a state.Cipher over tink AEAD key sets.
type cipher struct {
	kek      tink.AEADWithContext
	previous []tink.AEADWithContext
	table    state.KeyTable
	refresh  time.Duration
	clock    state.Clock

	mu   sync.RWMutex
	sets map[state.KeyScope]*loaded
}

// loaded is a data key set as read from the table.
type loaded struct {
	handle  *keyset.Handle // nil when the scope has none
	prim    tink.AEAD
	version int64 // the table's version of it; 0 when absent
	// erased is set when the scope's keys were destroyed; a key set made
	// after that keeps it, so that what was sealed before reads as erased.
	erased bool
	// demoted is stored.Demoted.
	demoted map[uint32]int64
	at      time.Time
}

// stored is a key table value: a wrapped key set, or the tombstone an
// erasure leaves.
type stored struct {
	Format int `json:"format"`
	// Keyset is the key set in tink's binary format, encrypted by the KEK
	// with the scope's name as associated data.
	Keyset []byte `json:"keyset,omitempty"`
	Erased bool   `json:"erased,omitempty"`
	// Demoted holds, for each key that was primary, when it stopped being
	// (Unix ms): RetireKey waits a refresh interval after that, until no
	// replica can still seal with it.
	Demoted map[uint32]int64 `json:"demoted,omitempty"`
}

// tableName returns the key table name of scope: the namespace, then the
// subject escaped (backend.EscapeID), so that no subject's name is a
// prefix of another's.
func tableName(s state.KeyScope) string {
	if s.Subject == "" {
		return s.Namespace
	}
	return s.Namespace + "/" + backend.EscapeID(s.Subject)
}

// kekAAD binds a wrapped key set to its scope: a wrapped key set copied to
// another namespace's or subject's name fails to unwrap.
func kekAAD(name string) []byte { return []byte("state.keyset.v1/" + name) }

// read loads scope's key set from the table.
func (c *cipher) read(ctx context.Context, s state.KeyScope) (*loaded, error) {
	name := tableName(s)
	v, ver, err := c.table.Get(ctx, name)
	if errors.Is(err, state.ErrNotFound) {
		return &loaded{at: time.Now()}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("encryption: reading the key set of %q: %w", name, err)
	}
	var st stored
	if err := json.Unmarshal(v, &st); err != nil {
		return nil, fmt.Errorf("encryption: the key set of %q: %w", name, err)
	}
	l := &loaded{version: ver, erased: st.Erased, demoted: st.Demoted, at: time.Now()}
	if len(st.Keyset) == 0 {
		return l, nil
	}
	h, err := c.unwrap(ctx, name, st.Keyset)
	if err != nil {
		return nil, err
	}
	if err := l.use(h); err != nil {
		return nil, fmt.Errorf("encryption: the key set of %q: %w", name, err)
	}
	return l, nil
}

// unwrap unwraps the key set of name with the KEK or, failing that, a
// previous KEK.
func (c *cipher) unwrap(ctx context.Context, name string, wrapped []byte) (*keyset.Handle, error) {
	h, err := keyset.ReadWithContext(ctx, keyset.NewBinaryReader(bytes.NewReader(wrapped)), c.kek, kekAAD(name))
	if err == nil {
		return h, nil
	}
	for _, p := range c.previous {
		if h, perr := keyset.ReadWithContext(ctx, keyset.NewBinaryReader(bytes.NewReader(wrapped)), p, kekAAD(name)); perr == nil {
			return h, nil
		}
	}
	return nil, fmt.Errorf("encryption: unwrapping the key set of %q with the KEK: %w", name, err)
}

// use makes h the loaded key set.
func (l *loaded) use(h *keyset.Handle) error {
	p, err := aead.New(h)
	if err != nil {
		return err
	}
	l.handle, l.prim = h, p
	return nil
}

// write stores l's key set (or, without one, a tombstone when erased) for
// scope if the table still has version l.version; ok is false when
// another writer got there first.
func (c *cipher) write(ctx context.Context, s state.KeyScope, l *loaded) (bool, error) {
	return c.writeName(ctx, tableName(s), l)
}

// writeName is write by the key table name.
func (c *cipher) writeName(ctx context.Context, name string, l *loaded) (bool, error) {
	st := stored{Format: 1, Erased: l.erased, Demoted: l.demoted}
	if l.handle != nil {
		var buf bytes.Buffer
		if err := l.handle.WriteWithContext(ctx, keyset.NewBinaryWriter(&buf), c.kek, kekAAD(name)); err != nil {
			return false, fmt.Errorf("encryption: wrapping the key set of %q with the KEK: %w", name, err)
		}
		st.Keyset = buf.Bytes()
	}
	b, err := json.Marshal(st)
	if err != nil {
		return false, err
	}
	ok, err := c.table.Put(ctx, name, b, l.version)
	if err != nil {
		return false, fmt.Errorf("encryption: storing the key set of %q: %w", name, err)
	}
	return ok, nil
}

// get returns scope's key set, from the cache while it is fresher than
// maxAge, creating it when create is set and it has none.
func (c *cipher) get(ctx context.Context, s state.KeyScope, create bool, maxAge time.Duration) (*loaded, error) {
	c.mu.RLock()
	l := c.sets[s]
	c.mu.RUnlock()
	if l != nil && time.Since(l.at) < maxAge && (l.handle != nil || !create) {
		return l, nil
	}
	for {
		nl, err := c.read(ctx, s)
		if err != nil {
			if l != nil && l.handle != nil {
				return l, nil // the table is unreachable: keep using what we have
			}
			return nil, err
		}
		if nl.handle == nil && create {
			h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
			if err != nil {
				return nil, err
			}
			if err := nl.use(h); err != nil {
				return nil, err
			}
			ok, err := c.write(ctx, s, nl)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue // another replica created it: use theirs
			}
			nl.version = 0 // unknown until read back; writes re-read anyway
		}
		c.mu.Lock()
		c.sets[s] = nl
		c.mu.Unlock()
		return nl, nil
	}
}

// Prepare implements state.Cipher.
func (c *cipher) Prepare(ctx context.Context, s state.KeyScope, create bool) error {
	_, err := c.get(ctx, s, create, time.Second)
	return err
}

// Seal implements state.Cipher.
func (c *cipher) Seal(ctx context.Context, s state.KeyScope, plaintext, aad []byte) ([]byte, error) {
	l, err := c.get(ctx, s, true, c.refresh)
	if err != nil {
		return nil, err
	}
	return l.prim.Encrypt(plaintext, aad)
}

// Open implements state.Cipher.
func (c *cipher) Open(ctx context.Context, s state.KeyScope, ciphertext, aad []byte) ([]byte, error) {
	l, err := c.get(ctx, s, false, c.refresh)
	if err != nil {
		return nil, err
	}
	if l.prim != nil {
		if pt, err := l.prim.Decrypt(ciphertext, aad); err == nil {
			return pt, nil
		}
	}
	if !l.has(ciphertext) || time.Since(l.at) > time.Second {
		// Perhaps another replica rotated the key set: read it again.
		if l, err = c.get(ctx, s, false, 0); err != nil {
			return nil, err
		}
		if l.prim != nil {
			if pt, err := l.prim.Decrypt(ciphertext, aad); err == nil {
				return pt, nil
			}
		}
	}
	switch {
	case l.erased && !l.has(ciphertext):
		return nil, state.ErrErased
	case l.handle == nil:
		return nil, fmt.Errorf("no data key set for namespace %q: %w", s.Namespace, state.ErrDecrypt)
	case !l.has(ciphertext):
		return nil, fmt.Errorf("sealed with key %d, which is not in the key set (retired, or another namespace's): %w", keyID(ciphertext), state.ErrDecrypt)
	}
	return nil, fmt.Errorf("authentication failed (altered, or moved from another record): %w", state.ErrDecrypt)
}

// has reports whether the key that sealed ct is in l's key set.
func (l *loaded) has(ct []byte) bool {
	if l.handle == nil {
		return false
	}
	id, ok := keyIDOf(ct)
	if !ok {
		return false
	}
	for _, k := range l.handle.KeysetInfo().GetKeyInfo() {
		if k.GetKeyId() == id {
			return true
		}
	}
	return false
}

// keyIDOf returns the id in the 5-byte prefix tink puts before a
// ciphertext of a key of output prefix TINK.
func keyIDOf(ct []byte) (uint32, bool) {
	if len(ct) < 5 || ct[0] != 1 {
		return 0, false
	}
	return binary.BigEndian.Uint32(ct[1:5]), true
}

func keyID(ct []byte) uint32 { id, _ := keyIDOf(ct); return id }

// KeyID implements state.Cipher.
func (c *cipher) KeyID(ciphertext []byte) (uint32, bool) { return keyIDOf(ciphertext) }

// Keys implements state.Cipher.
func (c *cipher) Keys(ctx context.Context, s state.KeyScope) ([]state.KeyInfo, error) {
	l, err := c.get(ctx, s, false, 0)
	if err != nil {
		return nil, err
	}
	if l.handle == nil {
		return nil, nil
	}
	info := l.handle.KeysetInfo()
	keys := make([]state.KeyInfo, 0, len(info.GetKeyInfo()))
	for _, k := range info.GetKeyInfo() {
		keys = append(keys, state.KeyInfo{ID: k.GetKeyId(), Primary: k.GetKeyId() == info.GetPrimaryKeyId()})
	}
	return keys, nil
}

// change applies fn to a fresh copy of scope's key set (creating one when
// it has none) and stores the result, retrying when another replica
// changed it meanwhile.
func (c *cipher) change(ctx context.Context, s state.KeyScope, fn func(m *keyset.Manager, l *loaded) error) (*loaded, error) {
	for {
		l, err := c.read(ctx, s)
		if err != nil {
			return nil, err
		}
		var m *keyset.Manager
		if l.handle == nil {
			h, err := keyset.NewHandle(aead.AES256GCMKeyTemplate())
			if err != nil {
				return nil, err
			}
			m = keyset.NewManagerFromHandle(h)
		} else {
			m = keyset.NewManagerFromHandle(l.handle)
		}
		if err := fn(m, l); err != nil {
			return nil, err
		}
		h, err := m.Handle()
		if err != nil {
			return nil, err
		}
		if err := l.use(h); err != nil {
			return nil, err
		}
		ok, err := c.write(ctx, s, l)
		if err != nil {
			return nil, err
		}
		if ok {
			l.at = time.Time{} // read it back (and its version) on next use
			c.mu.Lock()
			c.sets[s] = l
			c.mu.Unlock()
			return l, nil
		}
	}
}

// RotateKey implements state.Cipher.
func (c *cipher) RotateKey(ctx context.Context, s state.KeyScope) (state.KeyInfo, error) {
	var id uint32
	_, err := c.change(ctx, s, func(m *keyset.Manager, l *loaded) error {
		h, err := m.Handle()
		if err != nil {
			return err
		}
		old := h.KeysetInfo().GetPrimaryKeyId()
		if id, err = m.Add(aead.AES256GCMKeyTemplate()); err != nil {
			return err
		}
		if l.handle != nil { // a key set made just now demotes nothing
			l.demoted = maps.Clone(l.demoted)
			if l.demoted == nil {
				l.demoted = map[uint32]int64{}
			}
			l.demoted[old] = c.clock.Now().UnixMilli()
		}
		return m.SetPrimary(id)
	})
	if err != nil {
		return state.KeyInfo{}, err
	}
	return state.KeyInfo{ID: id, Primary: true}, nil
}

// RetireKey implements state.Cipher.
func (c *cipher) RetireKey(ctx context.Context, s state.KeyScope, id uint32) error {
	_, err := c.change(ctx, s, func(m *keyset.Manager, l *loaded) error {
		h, err := m.Handle()
		if err != nil {
			return err
		}
		info := h.KeysetInfo()
		if info.GetPrimaryKeyId() == id {
			return fmt.Errorf("key %d is the primary key: rotate first", id)
		}
		if ms, ok := l.demoted[id]; ok {
			if until := time.UnixMilli(ms).Add(c.refresh); c.clock.Now().Before(until) {
				return fmt.Errorf("key %d was the primary key until %s: another replica may still seal with it until %s (Config.RefreshInterval): %w",
					id, time.UnixMilli(ms).UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339), state.ErrKeyInUse)
			}
		}
		for _, k := range info.GetKeyInfo() {
			if k.GetKeyId() == id {
				l.demoted = maps.Clone(l.demoted)
				delete(l.demoted, id)
				return m.Delete(id)
			}
		}
		return fmt.Errorf("key %d: %w", id, state.ErrNotFound)
	})
	return err
}

// DestroyKeys implements state.Cipher: each key set is replaced by a
// tombstone, so that what it sealed reads as erased.
func (c *cipher) DestroyKeys(ctx context.Context, s state.KeyScope) error {
	names := []string{tableName(s)}
	if s.Subject == "" {
		subjects, err := c.table.List(ctx, s.Namespace+"/")
		if err != nil {
			return fmt.Errorf("encryption: listing the key sets of %q: %w", s.Namespace, err)
		}
		names = append(names, subjects...)
	}
	b, _ := json.Marshal(stored{Format: 1, Erased: true})
	for _, name := range names {
		for {
			_, ver, err := c.table.Get(ctx, name)
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				return fmt.Errorf("encryption: reading the key set of %q: %w", name, err)
			}
			ok, err := c.table.Put(ctx, name, b, ver)
			if err != nil {
				return fmt.Errorf("encryption: destroying the key set of %q: %w", name, err)
			}
			if ok {
				break
			}
		}
	}
	c.mu.Lock()
	for sc := range c.sets {
		if sc.Namespace == s.Namespace && (s.Subject == "" || sc.Subject == s.Subject) {
			delete(c.sets, sc)
		}
	}
	c.mu.Unlock()
	return nil
}
