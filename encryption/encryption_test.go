package encryption_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/encryption"
)

// The secrets each test writes and then looks for in the backend's bytes.
const (
	secretValue   = "VALUE-SECRET-7f3a"
	secretOutput  = "OUTPUT-SECRET-91bc"
	secretContext = "CONTEXT-SECRET-44d0"
	secretEffect  = "EFFECT-SECRET-0e5d"
	secretUpdate  = "UPDATE-SECRET-b2c8"
)

var allSecrets = []string{secretValue, secretOutput, secretContext, secretEffect, secretUpdate}

// newKeyURL returns a base64key:// URL of a fresh random key.
func newKeyURL(t testing.TB) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return "base64key://" + base64.StdEncoding.EncodeToString(k)
}

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// openSQLite opens an encrypted store over a new SQLite file.
func openSQLite(t testing.TB, path, keyURL string, opts *state.Options) (*state.Store, backend.Driver) {
	t.Helper()
	enc, err := encryption.Open(context.Background(), keyURL)
	if err != nil {
		t.Fatal(err)
	}
	return openSQLiteWith(t, path, enc, opts)
}

// openSQLiteWith opens a store over a new SQLite file encrypted by enc.
func openSQLiteWith(t testing.TB, path string, enc *encryption.Keyring, opts *state.Options) (*state.Store, backend.Driver) {
	t.Helper()
	d, err := sqlitestate.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := state.Options{SweepInterval: -1}
	if opts != nil {
		o = *opts
	}
	o.Encryption = enc
	st, err := state.New(d, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, d
}

// writeEverything writes each secret the way a user would: an entry, a
// session, a run's checkpoint, an effect's result and an Update.
func writeEverything(t testing.TB, st *state.Store, opts ...state.SubjectOption) {
	t.Helper()
	ctx := context.Background()
	var setOpts []state.SetOption
	var createOpts []state.CreateOption
	for _, o := range opts {
		setOpts = append(setOpts, o)
		createOpts = append(createOpts, o)
	}
	if _, err := st.Set(ctx, "profile", map[string]string{"v": secretValue}, setOpts...); err != nil {
		t.Fatal(err)
	}
	// A second Set, so that history holds a previous value too.
	if _, err := st.Set(ctx, "profile", map[string]string{"v": secretValue + "-2"}, setOpts...); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSession(ctx, "sess", map[string]string{"c": secretContext}, setOpts...); err != nil {
		t.Fatal(err)
	}
	run, err := st.CreateRun(ctx, "job", map[string]string{"team": "a"}, createOpts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, run.ID, "agent-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CheckpointRun(ctx, run.ID, 1, map[string]string{"o": secretOutput}, state.WithAgent("agent-1")); err != nil {
		t.Fatal(err)
	}
	if len(opts) == 0 {
		if _, err := st.Once(ctx, "effect", func(context.Context) (any, error) {
			return map[string]string{"e": secretEffect}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(ctx, []string{"counter"}, func(cur []state.Entry) ([]state.Write, error) {
			return []state.Write{{Key: "counter", Value: json.RawMessage(`{"u":"` + secretUpdate + `"}`)}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// fileBytes returns the bytes of a SQLite database: its file, its WAL and
// its shared memory.
func fileBytes(t testing.TB, path string) []byte {
	t.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// assertNoSecrets fails when any secret is in b.
func assertNoSecrets(t testing.TB, where string, b []byte, secrets ...string) {
	t.Helper()
	if len(secrets) == 0 {
		secrets = allSecrets
	}
	for _, s := range secrets {
		if bytes.Contains(b, []byte(s)) {
			t.Errorf("%s holds the plaintext %q", where, s)
		}
	}
}

// assertReadable reads back every secret through the store.
func assertReadable(t testing.TB, st *state.Store) {
	t.Helper()
	ctx := context.Background()
	e, err := st.Get(ctx, "profile")
	if err != nil || !strings.Contains(string(e.Value), secretValue) {
		t.Fatalf("Get(profile) = %s, %v", e.Value, err)
	}
	ss, err := st.GetSession(ctx, "sess")
	if err != nil || !strings.Contains(string(ss.Context), secretContext) {
		t.Fatalf("GetSession = %s, %v", ss.Context, err)
	}
	evs, err := st.History(ctx, state.HistoryQuery{Key: "profile", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || !strings.Contains(string(evs[0].Value), secretValue+"-2") || !strings.Contains(string(evs[0].Prev), secretValue) {
		t.Fatalf("History(profile) = %+v", evs)
	}
}

func TestNoPlaintextInSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "enc.db")
	st, _ := openSQLite(t, path, newKeyURL(t), nil)
	writeEverything(t, st)
	assertReadable(t, st)
	ctx := context.Background()
	runs, err := st.ListRuns(ctx)
	if err != nil || len(runs.Runs) != 1 {
		t.Fatalf("ListRuns = %+v, %v", runs, err)
	}
	res, err := st.ResumeRun(ctx, runs.Runs[0].ID)
	if err != nil || len(res.Outputs) != 1 || !strings.Contains(string(res.Outputs[0].Output), secretOutput) {
		t.Fatalf("ResumeRun = %+v, %v", res, err)
	}
	if e, err := st.Get(ctx, "counter"); err != nil || !strings.Contains(string(e.Value), secretUpdate) {
		t.Fatalf("Get(counter) = %s, %v", e.Value, err)
	}
	// The control: the same writes without encryption do leave plaintext,
	// so the search below can find it.
	plainPath := filepath.Join(t.TempDir(), "plain.db")
	d, err := sqlitestate.Open(ctx, plainPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	writeEverything(t, plain)
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	pb := fileBytes(t, plainPath)
	for _, s := range allSecrets {
		if !bytes.Contains(pb, []byte(s)) {
			t.Fatalf("control: the unencrypted file does not hold %q; the search cannot fail", s)
		}
	}
	// Keys, ids and tags stay in clear.
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	b := fileBytes(t, path)
	assertNoSecrets(t, "the SQLite file", b)
	for _, clear := range []string{"k/profile", "s/sess", "agent-1", "team"} {
		if !bytes.Contains(b, []byte(clear)) {
			t.Errorf("the SQLite file does not hold %q in clear", clear)
		}
	}
}

func TestMovedCiphertextFails(t *testing.T) {
	ctx := context.Background()
	st, d := openSQLite(t, filepath.Join(t.TempDir(), "enc.db"), newKeyURL(t), nil)
	other, err := st.Namespace("other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "a", "secret-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Set(ctx, "x", "secret-x"); err != nil { // gives "other" its key set
		t.Fatal(err)
	}
	raw, err := d.Get(ctx, "default", "k/a", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	put := func(ns, key string, v []byte) {
		t.Helper()
		if _, err := d.Commit(ctx, &backend.Txn{NS: ns, Then: []backend.Op{{Kind: backend.OpPut, Key: key, Value: v, Time: time.Now()}}}); err != nil {
			t.Fatal(err)
		}
	}
	// To another key of the same namespace.
	put("default", "k/b", raw.Value)
	if _, err := st.Get(ctx, "b"); !errors.Is(err, state.ErrDecrypt) {
		t.Errorf("Get of a ciphertext moved to another key: %v, want ErrDecrypt", err)
	}
	// To another kind of record under the same name.
	put("default", "s/a", raw.Value)
	if _, err := st.GetSession(ctx, "a"); !errors.Is(err, state.ErrDecrypt) {
		t.Errorf("GetSession of an entry's ciphertext: %v, want ErrDecrypt", err)
	}
	// To the same key of another namespace.
	put("other", "k/a", raw.Value)
	if _, err := other.Get(ctx, "a"); !errors.Is(err, state.ErrDecrypt) {
		t.Errorf("Get of a ciphertext moved to another namespace: %v, want ErrDecrypt", err)
	}
	// Altered.
	bad := bytes.Clone(raw.Value)
	bad[len(bad)-1] ^= 1
	put("default", "k/c", bad)
	if _, err := st.Get(ctx, "c"); !errors.Is(err, state.ErrDecrypt) {
		t.Errorf("Get of an altered ciphertext: %v, want ErrDecrypt", err)
	}
	// Plaintext where a ciphertext belongs: fail closed.
	put("default", "k/d", []byte(`"plain"`))
	if _, err := st.Get(ctx, "d"); !errors.Is(err, state.ErrNotEncrypted) {
		t.Errorf("Get of a plaintext record: %v, want ErrNotEncrypted", err)
	}
	if _, err := st.GetMany(ctx, []string{"a", "d"}); !errors.Is(err, state.ErrNotEncrypted) {
		t.Errorf("GetMany with a plaintext record: %v, want ErrNotEncrypted", err)
	}
	if _, err := d.Commit(ctx, &backend.Txn{NS: "default", Events: []backend.Event{{Key: "d", Op: "kv.set", Value: []byte(`"plain"`)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.History(ctx, state.HistoryQuery{Key: "d"}); !errors.Is(err, state.ErrNotEncrypted) {
		t.Errorf("History with a plaintext event: %v, want ErrNotEncrypted", err)
	}
	// And the original still reads.
	if e, err := st.Get(ctx, "a"); err != nil || string(e.Value) != `"secret-a"` {
		t.Errorf("Get(a) = %s, %v", e.Value, err)
	}
	// Another KEK cannot unwrap the key sets.
	st2, err := state.New(d, &state.Options{SweepInterval: -1, Encryption: mustKeyring(t, newKeyURL(t))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st2.Get(ctx, "a"); err == nil {
		t.Error("a store with another KEK read the entry")
	}
}

func mustKeyring(t testing.TB, url string) *encryption.Keyring {
	t.Helper()
	k, err := encryption.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestRotateReencryptRetire(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	kek, err := encryption.OpenKEK(ctx, newKeyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encryption.New(encryption.Config{KEK: kek, Clock: clk, RefreshInterval: 3 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := openSQLiteWith(t, filepath.Join(t.TempDir(), "enc.db"), enc, &state.Options{Clock: clk, HistoryMaxAge: time.Hour})
	writeEverything(t, st)
	keys, err := st.Keys(ctx)
	if err != nil || len(keys) != 1 || !keys[0].Primary || keys[0].Records == 0 {
		t.Fatalf("Keys = %+v, %v", keys, err)
	}
	old := keys[0].ID
	nk, err := st.RotateKey(ctx)
	if err != nil || nk.ID == old {
		t.Fatalf("RotateKey = %+v, %v", nk, err)
	}
	// New writes use the new key at once; old records still read.
	if _, err := st.Set(ctx, "after", "x"); err != nil {
		t.Fatal(err)
	}
	assertReadable(t, st)
	keys, err = st.Keys(ctx)
	if err != nil || len(keys) != 2 {
		t.Fatalf("Keys after rotation = %+v, %v", keys, err)
	}
	use := map[uint32]state.KeyInfo{}
	for _, k := range keys {
		use[k.ID] = k
	}
	if !use[nk.ID].Primary || use[nk.ID].Records != 1 || use[old].Records == 0 {
		t.Fatalf("Keys after rotation = %+v", keys)
	}
	if err := st.RetireKey(ctx, old); !errors.Is(err, state.ErrKeyInUse) {
		t.Fatalf("RetireKey of a key in use: %v, want ErrKeyInUse", err)
	}
	if err := st.RetireKey(ctx, nk.ID); err == nil {
		t.Fatal("RetireKey of the primary key succeeded")
	}
	n, err := st.Reencrypt(ctx)
	if err != nil || n != use[old].Records {
		t.Fatalf("Reencrypt = %d, %v; want %d", n, err, use[old].Records)
	}
	if ops := historyOps(t, st); ops["keys.rotate"] != 1 || ops["keys.reencrypt"] != 1 {
		t.Errorf("key management in history: %v", ops)
	}
	assertReadable(t, st)
	// History still holds events sealed with the old key: retiring it is
	// refused until they age out.
	var inUse *state.KeyInUseError
	if err := st.RetireKey(ctx, old); !errors.As(err, &inUse) || inUse.Records != 0 || inUse.Events == 0 {
		t.Fatalf("RetireKey after Reencrypt, before history aged out: %v", err)
	}
	clk.Add(2 * time.Hour)
	if _, err := st.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "profile", map[string]string{"v": secretValue + "-3"}); err != nil {
		t.Fatal(err)
	}
	// Nothing uses it now, but another replica may still seal with it
	// until a refresh interval (3h here) after it stopped being primary.
	if err := st.RetireKey(ctx, old); !errors.Is(err, state.ErrKeyInUse) || errors.As(err, &inUse) || !strings.Contains(err.Error(), "another replica") {
		t.Fatalf("RetireKey within the refresh interval of the rotation: %v", err)
	}
	clk.Add(2 * time.Hour)
	if err := st.RetireKey(ctx, old); err != nil {
		t.Fatalf("RetireKey after Reencrypt and history aged out: %v", err)
	}
	keys, err = st.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != nk.ID {
		t.Fatalf("Keys after retiring = %+v, %v", keys, err)
	}
	if ops := historyOps(t, st); ops["keys.retire"] != 1 {
		t.Errorf("key management in history after retiring: %v", ops)
	}
	for _, k := range []string{"after", "profile", "counter"} {
		if _, err := st.Get(ctx, k); err != nil {
			t.Errorf("Get(%s) after retiring the old key: %v", k, err)
		}
	}
	if ss, err := st.GetSession(ctx, "sess"); err != nil || !strings.Contains(string(ss.Context), secretContext) {
		t.Errorf("GetSession after retiring = %s, %v", ss.Context, err)
	}
}

func TestEraseSubject(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "enc.db")
	st, _ := openSQLite(t, path, newKeyURL(t), nil)
	writeEverything(t, st, state.WithSubject("alice"))
	if _, err := st.Set(ctx, "bob-profile", "bob's", state.WithSubject("bob")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "shared", "team data"); err != nil {
		t.Fatal(err)
	}
	runs, err := st.ListRuns(ctx)
	if err != nil || len(runs.Runs) != 1 || runs.Runs[0].Tags[state.SubjectTag] != "alice" {
		t.Fatalf("ListRuns = %+v, %v", runs, err)
	}
	aliceRun := runs.Runs[0].ID
	before, err := st.History(ctx, state.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	e, err := st.EraseSubject(state.WithPrincipal(ctx, "admin@example.com"), "alice")
	if err != nil {
		t.Fatal(err)
	}
	// profile, sess, the run and its output.
	if e.Records != 4 || e.Events != 3 || !e.KeysDestroyed { // two sets and a session save
		t.Errorf("EraseSubject = %+v, want 4 records, 3 events and keys destroyed", e)
	}
	if _, err := st.Get(ctx, "profile"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(profile) after erasure: %v", err)
	}
	if _, err := st.GetSession(ctx, "sess"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetSession after erasure: %v", err)
	}
	if _, err := st.GetRun(ctx, aliceRun); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("GetRun after erasure: %v", err)
	}
	if runs, err := st.ListRuns(ctx); err != nil || len(runs.Runs) != 0 {
		t.Errorf("ListRuns after erasure = %+v, %v", runs, err)
	}
	h, err := st.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Runs; n != 0 {
		t.Errorf("run counters after erasure count %d runs", n)
	}
	// Others' data is untouched.
	if e, err := st.Get(ctx, "bob-profile"); err != nil || string(e.Value) != `"bob's"` {
		t.Errorf("Get(bob-profile) = %s, %v", e.Value, err)
	}
	if _, err := st.Get(ctx, "shared"); err != nil {
		t.Errorf("Get(shared): %v", err)
	}
	// History: alice's writes are unreadable, shown as erased; the
	// tombstone says what, by whom and when, and nothing erased.
	after, err := st.History(ctx, state.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before)+1 {
		t.Fatalf("history had %d events, has %d after the erasure", len(before), len(after))
	}
	tomb := after[0]
	if tomb.Op != state.OpEraseSubject || tomb.Key != "alice" || tomb.Principal != "admin@example.com" || tomb.Time.IsZero() {
		t.Errorf("tombstone = %+v", tomb)
	}
	erased := 0
	for _, ev := range after {
		for _, s := range allSecrets {
			if strings.Contains(string(ev.Value)+string(ev.Prev), s) {
				t.Errorf("history event %+v still shows %q", ev, s)
			}
		}
		if ev.Op == state.OpErased {
			erased++
			if ev.Key != "" || ev.Value != nil || ev.Prev != nil {
				t.Errorf("erased event %+v keeps its key or payload", ev)
			}
		}
	}
	if erased != 3 { // two sets and a session save (a checkpoint's event holds run metadata only)
		t.Errorf("%d history events shown erased, want 3", erased)
	}
	// Erasing again is not an error; writing for alice again starts afresh.
	if _, err := st.EraseSubject(ctx, "alice"); err != nil {
		t.Errorf("second EraseSubject: %v", err)
	}
	if _, err := st.Set(ctx, "profile", "new", state.WithSubject("alice")); err != nil {
		t.Fatal(err)
	}
	if e, err := st.Get(ctx, "profile"); err != nil || string(e.Value) != `"new"` {
		t.Errorf("Get(profile) after a new write = %s, %v", e.Value, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	assertNoSecrets(t, "the SQLite file after erasure", fileBytes(t, path), secretContext) // sessions' history holds sizes only
}

func TestWithSubjectNeedsEncryption(t *testing.T) {
	ctx := context.Background()
	d, err := sqlitestate.Open(ctx, filepath.Join(t.TempDir(), "p.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Set(ctx, "k", 1, state.WithSubject("alice")); !errors.Is(err, state.ErrNoEncryption) {
		t.Errorf("Set WithSubject without encryption: %v", err)
	}
	if _, err := st.EraseSubject(ctx, "alice"); !errors.Is(err, state.ErrNoEncryption) {
		t.Errorf("EraseSubject without encryption: %v", err)
	}
}

// copyDB copies a SQLite database (its file and WAL) to dir.
func copyDB(t testing.TB, path, dir string) string {
	t.Helper()
	dst := filepath.Join(dir, filepath.Base(path))
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(path + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func TestEraseNamespaceShredsBackups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keyURL := newKeyURL(t)

	// Keys in a table of their own (another SQLite file), data in one
	// that is backed up: the backup of the data is unreadable after the
	// erasure, with the KEK and the live key table.
	keysDrv, err := sqlitestate.Open(ctx, filepath.Join(dir, "keys.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer keysDrv.Close()
	kek, err := encryption.OpenKEK(ctx, keyURL)
	if err != nil {
		t.Fatal(err)
	}
	newStore := func(path string) *state.Store {
		d, err := sqlitestate.Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := encryption.New(encryption.Config{KEK: kek, Table: state.DriverKeyTable(keysDrv)})
		if err != nil {
			t.Fatal(err)
		}
		st, err := state.New(d, &state.Options{SweepInterval: -1, Namespace: "tenant-a", Encryption: enc})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	dataPath := filepath.Join(dir, "data.db")
	st := newStore(dataPath)
	writeEverything(t, st)
	other, _ := st.Namespace("tenant-b")
	if _, err := other.Set(ctx, "kept", "b's"); err != nil {
		t.Fatal(err)
	}
	backupDir := t.TempDir()
	backup := copyDB(t, dataPath, backupDir)
	// The backup reads before the erasure (the test can fail).
	bst := newStore(backup)
	assertReadable(t, bst)
	if err := bst.Close(); err != nil {
		t.Fatal(err)
	}
	backup = copyDB(t, dataPath, t.TempDir())

	e, err := st.EraseNamespace(state.WithPrincipal(ctx, "ops"))
	if err != nil || !e.KeysDestroyed || e.Records == 0 || e.Events == 0 {
		t.Fatalf("EraseNamespace = %+v, %v", e, err)
	}
	if _, err := st.Get(ctx, "profile"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get after the erasure: %v", err)
	}
	evs, err := st.History(ctx, state.HistoryQuery{})
	if err != nil || len(evs) != 1 || evs[0].Op != state.OpEraseNamespace || evs[0].Principal != "ops" {
		t.Errorf("history after the erasure = %+v, %v", evs, err)
	}
	if e, err := other.Get(ctx, "kept"); err != nil || string(e.Value) != `"b's"` {
		t.Errorf("another tenant's entry after the erasure = %s, %v", e.Value, err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	bst = newStore(backup)
	defer bst.Close()
	if _, err := bst.Get(ctx, "profile"); !errors.Is(err, state.ErrErased) {
		t.Errorf("Get from the backup after the erasure: %v, want ErrErased", err)
	}
	if _, err := bst.GetSession(ctx, "sess"); !errors.Is(err, state.ErrErased) {
		t.Errorf("GetSession from the backup after the erasure: %v, want ErrErased", err)
	}
	if _, err := bst.History(ctx, state.HistoryQuery{Key: "profile"}); err != nil {
		t.Errorf("History from the backup: %v", err)
	} else if evs, _ := bst.History(ctx, state.HistoryQuery{Key: "profile"}); len(evs) == 0 || evs[0].Op != state.OpErased {
		t.Errorf("History from the backup = %+v, want erased events", evs)
	}
}

func TestEraseNamespaceShredsRestoredRecords(t *testing.T) {
	// The default layout (keys in the store's own backend): a backup's
	// records restored into the live store after the erasure are
	// unreadable.
	ctx := context.Background()
	st, d := openSQLite(t, filepath.Join(t.TempDir(), "enc.db"), newKeyURL(t), nil)
	if _, err := st.Set(ctx, "profile", secretValue); err != nil {
		t.Fatal(err)
	}
	saved, err := d.Get(ctx, "default", "k/profile", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.EraseNamespace(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "fresh", 1); err != nil { // the tenant lives on, with new keys
		t.Fatal(err)
	}
	if _, err := d.Commit(ctx, &backend.Txn{NS: "default", Then: []backend.Op{{Kind: backend.OpPut, Key: "k/profile", Value: saved.Value, Time: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, "profile"); !errors.Is(err, state.ErrErased) {
		t.Errorf("Get of a restored record after the erasure: %v, want ErrErased", err)
	}
	if e, err := st.Get(ctx, "fresh"); err != nil || string(e.Value) != "1" {
		t.Errorf("Get(fresh) = %s, %v", e.Value, err)
	}
}

func TestKeyURLs(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"", "base64key://", "base64key://AAAA", "nope://x", "file:///does/not/exist"} {
		if _, err := encryption.OpenKEK(ctx, bad); !errors.Is(err, encryption.ErrKeyURL) {
			t.Errorf("OpenKEK(%q) = %v, want ErrKeyURL", bad, err)
		}
	}
	k := make([]byte, 32)
	k[0] = 7
	p := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := encryption.OpenKEK(ctx, "file://"+p)
	if err != nil {
		t.Fatal(err)
	}
	fromURL, err := encryption.OpenKEK(ctx, "base64key://"+base64.URLEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := fromFile.EncryptWithContext(ctx, []byte("x"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := fromURL.DecryptWithContext(ctx, ct, []byte("ad")); err != nil || string(pt) != "x" {
		t.Errorf("the same key from a file and a URL do not agree: %q, %v", pt, err)
	}
}

func TestConformanceEncrypted(t *testing.T) {
	enc := mustKeyring(t, newKeyURL(t))
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		d := memstate.New()
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, enc)
}

func TestConformanceEncryptedSQLite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	enc := mustKeyring(t, newKeyURL(t))
	backendtest.RunEncrypted(t, func(t *testing.T) backend.Driver {
		d, err := sqlitestate.Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}, enc)
}

func TestContextWithSubject(t *testing.T) {
	ctx := context.Background()
	st, _ := openSQLite(t, filepath.Join(t.TempDir(), "enc.db"), newKeyURL(t), nil)
	cctx := state.ContextWithSubject(ctx, "carol")
	if _, err := st.Set(cctx, "c1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSession(cctx, "cs", map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	r, err := st.CreateRun(cctx, "job", nil)
	if err != nil || r.Tags[state.SubjectTag] != "carol" {
		t.Fatalf("CreateRun under ContextWithSubject = %+v, %v", r, err)
	}
	if _, err := st.Update(cctx, []string{"c2"}, func([]state.Entry) ([]state.Write, error) {
		return []state.Write{{Key: "c2", Value: json.RawMessage("2")}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Once(cctx, "c3", func(context.Context) (any, error) { return 3, nil }); err != nil {
		t.Fatal(err)
	}
	// WithSubject wins over the context's.
	if _, err := st.Set(cctx, "d1", 1, state.WithSubject("dave")); err != nil {
		t.Fatal(err)
	}
	e, err := st.EraseSubject(ctx, "carol")
	if err != nil || e.Records != 5 {
		t.Fatalf("EraseSubject(carol) = %+v, %v; want 5 records", e, err)
	}
	if _, err := st.Get(ctx, "c2"); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("Get(c2), written by Update for carol, after erasure: %v", err)
	}
	if _, err := st.Get(ctx, "d1"); err != nil {
		t.Errorf("Get(d1), dave's: %v", err)
	}
}

func TestRotationSeenByAnotherReplica(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "enc.db")
	key := newKeyURL(t)
	a, _ := openSQLite(t, path, key, nil)
	b, _ := openSQLite(t, path, key, nil)
	if _, err := a.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k"); err != nil { // b loads the key set
		t.Fatal(err)
	}
	if _, err := a.RotateKey(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, "k", 2); err != nil { // sealed with the new key
		t.Fatal(err)
	}
	// b, whose key set is fresh, reads and updates it at once.
	if e, err := b.Get(ctx, "k"); err != nil || string(e.Value) != "2" {
		t.Fatalf("b.Get after a's rotation = %s, %v", e.Value, err)
	}
	if _, err := a.Set(ctx, "u", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RotateKey(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Set(ctx, "u", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Update(ctx, []string{"u"}, func(cur []state.Entry) ([]state.Write, error) {
		if string(cur[0].Value) != "3" {
			return nil, fmt.Errorf("read %s", cur[0].Value)
		}
		return []state.Write{{Key: "u", Value: json.RawMessage("4")}}, nil
	}); err != nil {
		t.Fatalf("b.Update after a's rotation: %v", err)
	}
	if e, err := a.Get(ctx, "u"); err != nil || string(e.Value) != "4" {
		t.Fatalf("a.Get(u) = %s, %v", e.Value, err)
	}
}

func TestKEKRotation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "enc.db")
	oldKey, newKey := newKeyURL(t), newKeyURL(t)
	st, d := openSQLite(t, path, oldKey, nil)
	if _, err := st.Set(ctx, "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "p", 2, state.WithSubject("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EraseSubject(ctx, "alice"); err != nil { // a tombstone, which has nothing to rewrap
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "q", 3, state.WithSubject("bob")); err != nil {
		t.Fatal(err)
	}
	// Step 1: the new KEK, with the old one to unwrap.
	both, err := encryption.Open(ctx, newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	st2, err := state.New(d, &state.Options{SweepInterval: -1, Encryption: both})
	if err != nil {
		t.Fatal(err)
	}
	if e, err := st2.Get(ctx, "k"); err != nil || string(e.Value) != "1" {
		t.Fatalf("Get with the new KEK and the old one = %s, %v", e.Value, err)
	}
	// The new KEK alone cannot read yet.
	alone, _ := state.New(d, &state.Options{SweepInterval: -1, Encryption: mustKeyring(t, newKey)})
	if _, err := alone.Get(ctx, "k"); err == nil {
		t.Fatal("the new KEK alone read a key set the old one wrapped")
	}
	// Step 2: rewrap; step 3: the old KEK can go.
	n, err := both.Rewrap(ctx, state.DriverKeyTable(d))
	if err != nil || n != 2 { // default's and bob's; alice's is a tombstone
		t.Fatalf("Rewrap = %d, %v; want 2", n, err)
	}
	if n, err := both.Rewrap(ctx, state.DriverKeyTable(d)); err != nil || n != 0 {
		t.Fatalf("second Rewrap = %d, %v; want 0", n, err)
	}
	fresh, _ := state.New(d, &state.Options{SweepInterval: -1, Encryption: mustKeyring(t, newKey)})
	for k, want := range map[string]string{"k": "1", "q": "3"} {
		if e, err := fresh.Get(ctx, k); err != nil || string(e.Value) != want {
			t.Errorf("Get(%s) with the new KEK alone after Rewrap = %s, %v", k, e.Value, err)
		}
	}
	stale, _ := state.New(d, &state.Options{SweepInterval: -1, Encryption: mustKeyring(t, oldKey)})
	if _, err := stale.Get(ctx, "k"); err == nil {
		t.Error("the old KEK still reads after Rewrap")
	}
}

func TestEncryptedStoreReadWithoutEncryptionFails(t *testing.T) {
	ctx := context.Background()
	st, d := openSQLite(t, filepath.Join(t.TempDir(), "enc.db"), newKeyURL(t), nil)
	if _, err := st.Set(ctx, "k", secretValue); err != nil {
		t.Fatal(err)
	}
	plain, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Get(ctx, "k"); !errors.Is(err, state.ErrNoEncryption) {
		t.Errorf("Get of a sealed record without encryption: %v, want ErrNoEncryption", err)
	}
	if _, err := plain.GetMany(ctx, []string{"k"}); !errors.Is(err, state.ErrNoEncryption) {
		t.Errorf("GetMany of a sealed record without encryption: %v, want ErrNoEncryption", err)
	}
	if _, err := plain.History(ctx, state.HistoryQuery{Key: "k"}); !errors.Is(err, state.ErrNoEncryption) {
		t.Errorf("History of sealed events without encryption: %v, want ErrNoEncryption", err)
	}
}

// historyOps counts the ops of the store's newest 1000 history events.
func historyOps(t *testing.T, st *state.Store) map[string]int {
	t.Helper()
	evs, err := st.History(context.Background(), state.HistoryQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, ev := range evs {
		ops[ev.Op]++
	}
	return ops
}
