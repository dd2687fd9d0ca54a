package sidecar

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/encryption"
)

func TestEncryptionStartupLine(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	cfg := memConfig()
	sc, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	_ = sc.Close()
	if !strings.Contains(buf.String(), "encryption at rest: off") {
		t.Errorf("startup log without STATE_ENCRYPTION_KEY_URL:\n%s", buf.String())
	}
	buf.Reset()
	cfg.EncryptionKeyURL = newTestKeyURL(t)
	sc, err = New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	_ = sc.Close()
	if !strings.Contains(buf.String(), "encryption at rest: on") || strings.Contains(buf.String(), cfg.EncryptionKeyURL[len("base64key://"):]) {
		t.Errorf("startup log with STATE_ENCRYPTION_KEY_URL (must say on, never the key):\n%s", buf.String())
	}
	cfg.EncryptionKeyURL = "base64key://c2hvcnQ="
	if _, err := New(context.Background(), cfg, log); err == nil || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Errorf("New with a bad key URL: %v", err)
	}
}

func newTestKeyURL(t *testing.T) string {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return "base64key://" + base64.StdEncoding.EncodeToString(k)
}

func TestEraseAndKeysCommands(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	key := newTestKeyURL(t)
	vars := map[string]string{"STATE_BACKEND": "sqlite", "DB_PATH": path, "STATE_ENCRYPTION_KEY_URL": key, "USER": "tester"}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		env := Env{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, Stdout: &out, Stderr: &errb}
		code := Main(ctx, args, env, EraseCommand(), KeysCommand())
		return code, out.String(), errb.String()
	}
	// Data written by a program with the same key.
	enc, err := encryption.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.DefaultURLMux().Open(ctx, "sqlite://"+path, &state.Options{SweepInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "a", 1, state.WithSubject("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "b", 2); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errs := run("erase", "-subject", "alice")
	if code != 0 || !strings.Contains(out, `"records": 1`) || !strings.Contains(out, `"keys_destroyed": true`) {
		t.Fatalf("erase -subject = %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := run("erase", "-all"); code != 2 || !strings.Contains(errs, "-yes") {
		t.Errorf("erase -all without -yes = %d, %s", code, errs)
	}
	if code, _, _ := run("erase"); code != 2 {
		t.Errorf("erase without -subject or -all = %d", code)
	}

	code, out, errs = run("keys", "list")
	var listed struct {
		Keys []struct {
			ID      uint32 `json:"id"`
			Primary bool   `json:"primary"`
		} `json:"keys"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed.Keys) != 1 {
		t.Fatalf("keys list = %d\n%s\n%s", code, out, errs)
	}
	old := listed.Keys[0].ID
	if code, out, errs := run("keys", "rotate"); code != 0 || !strings.Contains(out, `"primary"`) {
		t.Fatalf("keys rotate = %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := run("keys", "reencrypt"); code != 0 || !strings.Contains(out, `"reencrypted": 1`) {
		t.Fatalf("keys reencrypt = %d\n%s\n%s", code, out, errs)
	}
	// b's history event still uses the old key.
	if code, _, errs := run("keys", "retire", itoa32(old)); code != 1 || !strings.Contains(errs, "still seals") {
		t.Errorf("keys retire of a key in use = %d, %s", code, errs)
	}
	if code, _, _ := run("keys", "retire", "x"); code != 2 {
		t.Errorf("keys retire x = %d", code)
	}
	if code, _, _ := run("keys", "spin"); code != 2 {
		t.Errorf("keys spin = %d", code)
	}

	// The tombstone names the operator.
	st, err = state.DefaultURLMux().Open(ctx, "sqlite://"+path, &state.Options{SweepInterval: -1, Encryption: enc})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.History(ctx, state.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs {
		if ev.Op == state.OpEraseSubject && ev.Key == "alice" && strings.HasPrefix(ev.Principal, "cli:") {
			found = true
		}
	}
	if !found {
		t.Errorf("no tombstone by the operator in history: %+v", evs)
	}

	// A rotation of the KEK: the new key with the old one, rewrap, then
	// the new key alone.
	newKey := newTestKeyURL(t)
	vars["STATE_ENCRYPTION_KEY_URL"], vars["STATE_ENCRYPTION_PREVIOUS_KEY_URLS"] = newKey, key
	if code, out, errs := run("keys", "rewrap"); code != 0 || strings.Contains(out, `"rewrapped": 0`) {
		t.Fatalf("keys rewrap = %d\n%s\n%s", code, out, errs)
	}
	delete(vars, "STATE_ENCRYPTION_PREVIOUS_KEY_URLS")
	if code, out, errs := run("keys", "list"); code != 0 || !strings.Contains(out, `"primary": true`) {
		t.Fatalf("keys list with the new KEK alone = %d\n%s\n%s", code, out, errs)
	}

	delete(vars, "STATE_ENCRYPTION_KEY_URL")
	if code, _, errs := run("keys", "list"); code != 2 || !strings.Contains(errs, "STATE_ENCRYPTION_KEY_URL") {
		t.Errorf("keys list without a key URL = %d, %s", code, errs)
	}
}

func itoa32(id uint32) string { b, _ := json.Marshal(id); return string(b) }

func TestCopyCommandCopiesDataKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "a.db"), filepath.Join(dir, "b.db")
	key := newTestKeyURL(t)
	enc, err := encryption.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	open := func(path string) *state.Store {
		st, err := state.DefaultURLMux().Open(ctx, "sqlite://"+path, &state.Options{SweepInterval: -1, Encryption: enc})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open(src)
	if _, err := st.Set(ctx, "k", "secret"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Set(ctx, "p", "alice's", state.WithSubject("alice")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	copyTo := func(dst string, args ...string) string {
		var out, errb bytes.Buffer
		env := Env{LookupEnv: func(string) (string, bool) { return "", false }, Stdout: &out, Stderr: &errb}
		args = append(append([]string{"copy", "-quiet"}, args...), "sqlite://"+src, "sqlite://"+dst)
		if code := Main(ctx, args, env, CopyCommand()); code != 0 {
			t.Fatalf("copy = %d\n%s\n%s", code, out.String(), errb.String())
		}
		st := open(dst)
		defer st.Close()
		for k, want := range map[string]string{"k": `"secret"`, "p": `"alice's"`} {
			if e, err := st.Get(ctx, k); err != nil || string(e.Value) != want {
				t.Errorf("Get(%s) from the copy = %s, %v", k, e.Value, err)
			}
		}
		return out.String()
	}
	// Every namespace, the key table's included.
	copyTo(dst)
	// One namespace: its key sets are copied with it.
	if out := copyTo(filepath.Join(dir, "c.db"), "-namespace", "default"); !strings.Contains(out, "2 wrapped data key sets copied") {
		t.Errorf("copy -namespace default's report:\n%s", out)
	}
}

func TestSubjectFromPrincipalNeedsEncryption(t *testing.T) {
	vars := map[string]string{"SIDECAR_SUBJECT_FROM_PRINCIPAL": "true"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	if _, err := Load(nil, lookup, io.Discard); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "STATE_ENCRYPTION_KEY_URL") {
		t.Errorf("SIDECAR_SUBJECT_FROM_PRINCIPAL without a key: %v", err)
	}
	vars["STATE_ENCRYPTION_KEY_URL"] = newTestKeyURL(t)
	if c, err := Load(nil, lookup, io.Discard); err != nil || !c.SubjectFromPrincipal {
		t.Errorf("SIDECAR_SUBJECT_FROM_PRINCIPAL with a key: %+v, %v", c.SubjectFromPrincipal, err)
	}
}
