// Package storetest gives the tests of code built on package state (the
// framework adapters under adapters/ among them) a fresh, isolated store on
// every backend the environment offers: memory and SQLite always, Redis when
// STATE_TEST_REDIS_URL is set, and PostgreSQL when STATE_TEST_POSTGRES_URL is
// set and a "postgres" URL scheme is registered (blank-import its backend).
// Each store is cleaned up when the test ends.
//
// A backend is named by a URL, so that a test can hand the same store to a
// second process: Backend.URL opens it anywhere (except memory, which lives
// in one process).
package storetest

import (
	"context"
	"crypto/rand"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/memstate" // mem://
	_ "github.com/statesidecar/state/backend/pgstate"  // postgres://
	"github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate" // sqlite://
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/skipnote"
)

// The variables naming the network backends' URLs.
const (
	EnvRedisURL    = redistest.EnvURL
	EnvPostgresURL = "STATE_TEST_POSTGRES_URL"
)

// A Backend is a fresh store location on one backend.
type Backend struct {
	// Name is the backend's short name: "memory", "sqlite", "redis",
	// "postgres".
	Name string
	// URL opens the store with state.Open; "" when Skip is set.
	URL string
	// Shared is set when other processes can open URL too.
	Shared bool
	// Skip, when set, says why the backend is not available here.
	Skip string
}

// Names lists the backends, in the order Run runs them.
var Names = []string{"memory", "sqlite", "redis", "postgres"}

// New returns a fresh location on the backend called name (one of Names);
// when the environment does not offer it, the Backend carries a Skip
// reason. A location on a network backend is removed when tb ends.
func New(tb testing.TB, name string) Backend {
	tb.Helper()
	switch name {
	case "memory":
		return Backend{Name: name, URL: "mem://" + rand.Text()}
	case "sqlite":
		return Backend{Name: name, URL: "sqlite://" + tb.TempDir() + "/state.db", Shared: true}
	case "redis":
		return redisBackend(tb)
	case "postgres":
		return postgresBackend(tb)
	}
	tb.Fatalf("storetest: unknown backend %q (known: %s)", name, strings.Join(Names, ", "))
	return Backend{}
}

// Run runs f as a subtest per backend, skipping those the environment does
// not offer with a message naming the variable to set. f may call New with
// b.Name for more fresh locations on the same backend.
func Run(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, name := range Names {
		t.Run(name, func(t *testing.T) {
			b := New(t, name)
			if b.Skip != "" {
				t.Skip(b.Skip)
			}
			f(t, b)
		})
	}
}

// Open opens a store at url with opts (which may be nil) and closes it when
// tb ends.
func Open(tb testing.TB, url string, opts *state.Options) *state.Store {
	tb.Helper()
	st, err := state.DefaultURLMux().Open(context.Background(), url, opts)
	if err != nil {
		tb.Fatalf("opening %s: %v", url, err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

func redisBackend(tb testing.TB) Backend {
	raw := os.Getenv(EnvRedisURL)
	if raw == "" {
		skipnote.Note(EnvRedisURL, "Redis")
		return Backend{Name: "redis", Skip: "set " + EnvRedisURL + " (e.g. redis://127.0.0.1:6379/0) to run the Redis tests"}
	}
	prefix := redistest.Prefix()
	u := withQuery(raw, "prefix", prefix)
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), redistest.Wait)
		defer cancel()
		d, err := redisstate.Open(ctx, raw)
		if err != nil {
			tb.Errorf("removing the test keys of %s: %v", prefix, err)
			return
		}
		defer d.Close()
		if err := redistest.Purge(ctx, d.Client(), prefix); err != nil {
			tb.Errorf("removing the test keys of %s: %v", prefix, err)
		}
	})
	return Backend{Name: "redis", URL: u, Shared: true}
}

func postgresBackend(tb testing.TB) Backend {
	raw := os.Getenv(EnvPostgresURL)
	switch {
	case raw == "":
		skipnote.Note(EnvPostgresURL, "PostgreSQL")
		return Backend{Name: "postgres", Skip: "set " + EnvPostgresURL + " to run the PostgreSQL tests"}
	case !slices.Contains(state.DefaultURLMux().Schemes(), "postgres"):
		return Backend{Name: "postgres", Skip: EnvPostgresURL + " is set but no postgres:// backend is linked into this test"}
	}
	// A schema of its own, dropped when the test ends, takes every table,
	// sequence and function of the test with it.
	u := withQuery(raw, "schema", pgtest.Schema(tb, raw))
	return Backend{Name: "postgres", URL: u, Shared: true}
}

// withQuery adds a query parameter to a URL.
func withQuery(raw, k, v string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw // state.Open reports it
	}
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}
