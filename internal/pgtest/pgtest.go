// Package pgtest helps the tests of package pgstate: it reads the URL of the
// PostgreSQL server tests run against, hands out schemas that no other test
// uses and drops them afterwards, and starts throwaway PostgreSQL clusters
// on spare loopback ports (for outage, durability and failover tests).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state/internal/skipnote"
)

// EnvURL names the variable holding the URL of the PostgreSQL server the
// tests use, such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
// Tests needing it skip when it is unset.
const EnvURL = "STATE_TEST_POSTGRES_URL"

// Wait bounds every wait for a server; generous, because a busy two-core
// machine may be slow, and never reached when things work.
const Wait = 60 * time.Second

// URL returns the PostgreSQL URL of EnvURL, or skips the test.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		skipnote.Note(EnvURL, "PostgreSQL")
		t.Skipf("set %s (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the tests that need PostgreSQL", EnvURL)
	}
	return u
}

// Name returns a schema name no other test or test run uses.
func Name() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "st_test_" + hex.EncodeToString(b[:])
}

// Schema returns a fresh schema name on the server of dbURL and drops the
// schema (with everything in it) when the test ends. The schema itself is
// created by whoever first opens a driver on it.
func Schema(t testing.TB, dbURL string) string {
	t.Helper()
	name := Name()
	t.Cleanup(func() { Drop(t, dbURL, name) })
	return name
}

// Drop drops schema name on the server of dbURL, if it exists.
func Drop(t testing.TB, dbURL, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Errorf("pgtest: dropping schema %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: dropping schema %s: %v", name, err)
	}
}

// WithParams returns u with query parameters set (each "name=value").
func WithParams(t testing.TB, u string, params ...string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	q := p.Query()
	for _, kv := range params {
		k, v, _ := strings.Cut(kv, "=")
		q.Set(k, v)
	}
	p.RawQuery = q.Encode()
	return p.String()
}
