package pgstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestOneTrimmerAtATime holds a namespace's trim lock as another replica
// trimming it would: TrimHistory then returns at once having removed
// nothing and asking for nothing more, instead of waiting; other namespaces
// are trimmed meanwhile, and once the lock is free the namespace is too.
func TestOneTrimmerAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	now := time.UnixMilli(1_900_000_000_000)
	for _, ns := range []string{"a", "b"} {
		for range 5 {
			if _, err := d.Commit(ctx, &backend.Txn{NS: ns, Now: now, Events: []backend.Event{{Key: "k", Op: "x"}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", d.trimLock("a")); err != nil {
		t.Fatal(err)
	}
	res, err := d.TrimHistory(ctx, &backend.TrimQuery{NS: "a", Keep: 1, Limit: 2})
	if err != nil || res != (backend.TrimResult{}) {
		t.Errorf("TrimHistory while another process trims: %+v, %v; want nothing done and nothing more", res, err)
	}
	res, err = d.TrimHistory(ctx, &backend.TrimQuery{NS: "b", Keep: 1, Limit: 10})
	if err != nil || res != (backend.TrimResult{Events: 4}) {
		t.Errorf("TrimHistory of another namespace meanwhile: %+v, %v; want 4 removed", res, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = d.TrimHistory(ctx, &backend.TrimQuery{NS: "a", Keep: 1, Limit: 10})
	if err != nil || res != (backend.TrimResult{Events: 4}) {
		t.Errorf("TrimHistory once the lock is free: %+v, %v; want 4 removed", res, err)
	}
}

// TestPing reports a writable database as ready and a read-only one as
// unavailable.
func TestPing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	if err := d.Ping(ctx); err != nil {
		t.Errorf("Ping of a writable database: %v", err)
	}
	pool, err := pgxpool.New(ctx, pgtest.WithParams(t, pgtest.URL(t), "default_transaction_read_only=on"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ro := &Driver{pool: pool, schema: d.schema, q: d.q} // New would fail to migrate: nothing can be written
	if err := ro.Ping(ctx); !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Ping of a read-only database: %v; want backend.ErrUnavailable saying why", err)
	}
}

// TestCheckConfigWarns checks the configuration as the driver's
// connections see it: settings a session can change (here through the URL)
// that weaken the store are each reported, and the sessions of the tests'
// server are not.
func TestCheckConfigWarns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx, "synchronous_commit=off", "default_transaction_isolation=serializable", "pool_max_conns=100000")
	warnings, err := d.CheckConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"synchronous_commit off", `default_transaction_isolation is "serializable"`, "max_connections"} {
		found := false
		for _, w := range warnings {
			found = found || strings.Contains(w, want)
		}
		if !found {
			t.Errorf("CheckConfig gave %q; want a warning about %s", warnings, want)
		}
	}
	plain, err := newTestDriver(t, ctx).CheckConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the tests' server: %q", plain)
	for _, w := range plain {
		if strings.Contains(w, "synchronous_commit") || strings.Contains(w, "isolation") {
			t.Errorf("CheckConfig of the tests' server warned about a setting it does not have: %s", w)
		}
	}
}

// TestConfigWarnings covers the settings a session cannot change.
func TestConfigWarnings(t *testing.T) {
	w := configWarnings(map[string]string{"fsync": "off", "autovacuum": "off", "max_connections": "100",
		"superuser_reserved_connections": "3", "reserved_connections": "0"}, 4)
	if len(w) != 2 || !strings.Contains(w[0], "fsync off") || !strings.Contains(w[1], "autovacuum off") {
		t.Errorf("configWarnings: %q; want fsync and autovacuum", w)
	}
	if w := configWarnings(map[string]string{"fsync": "on", "autovacuum": "on", "synchronous_commit": "on",
		"default_transaction_isolation": "read committed", "max_connections": "100",
		"superuser_reserved_connections": "3"}, 97); len(w) != 0 {
		t.Errorf("configWarnings of a sound configuration: %q", w)
	}
}

// TestRevisionsFollowAnInjectedClock: under an injected clock, revisions
// depend on that clock and the writes only, not on when the test runs: a
// namespace's first revision is its first commit's time in microseconds,
// and its sequence moves up to a commit's time when it is more than 100 ms
// behind.
func TestRevisionsFollowAnInjectedClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	t0 := time.UnixMilli(1_600_000_000_000) // in the past
	put := func(now time.Time) int64 {
		t.Helper()
		res, err := d.Commit(ctx, &backend.Txn{NS: "ns", Now: now, Then: []backend.Op{{Kind: backend.OpPut, Key: "k", Time: now}}})
		if err != nil || !res.Committed {
			t.Fatalf("commit: %+v, %v", res, err)
		}
		return res.Revision
	}
	base := t0.UnixMicro()
	for i, want := range []int64{base, base + 1, base + 2} {
		if got := put(t0); got != want {
			t.Errorf("commit %d at t0: revision %d, want %d", i, got, want)
		}
	}
	later := t0.Add(time.Second)
	if got, want := put(later), later.UnixMicro()+1; got != want {
		t.Errorf("commit a second later: revision %d, want %d (moved up to the clock)", got, want)
	}
	if got, want := put(t0), later.UnixMicro()+2; got != want {
		t.Errorf("commit back at t0: revision %d, want %d (never back)", got, want)
	}
}
