package pgstate_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestBehindPgBouncer runs the whole conformance suite (races included)
// through PgBouncer in transaction pooling mode, where consecutive
// transactions of one client connection may run on different server
// connections: the driver keeps no session state. PgBouncer before 1.21
// (Debian 12 ships 1.18) does not carry named prepared statements across
// server connections, so pgx must not create them:
// default_query_exec_mode=exec or cache_describe in the URL, both one round
// trip per statement. Notifications (Notify) go through a direct
// connection, Options.Listen; TestNotifyBehindPgBouncer checks that
// without one Notify says it cannot notify. With one writer per kind,
// concurrent sets, lease calls and claims go in batches, each one
// transaction through PgBouncer.
func TestBehindPgBouncer(t *testing.T) {
	u := pgtest.URL(t)
	b := pgtest.StartBouncer(t, u)
	for _, mode := range []string{"exec", "cache_describe"} {
		t.Run(mode, func(t *testing.T) {
			cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
			defer cancel()
			pool, err := pgxpool.New(cctx, b.URL("default_query_exec_mode="+mode, "pool_max_conns=8"))
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			backendtest.Run(t, func(t *testing.T) backend.Driver {
				cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
				defer cancel()
				// LISTEN needs a session: the driver listens on a
				// direct connection.
				d, err := pgstate.New(cctx, pool, &pgstate.Options{Schema: pgtest.Schema(t, u), Listen: u, Writers: 1})
				if err != nil {
					t.Fatalf("New through PgBouncer: %v", err)
				}
				t.Cleanup(func() { _ = d.Close() })
				return d
			})
		})
	}
}

// TestNotifyBehindPgBouncer checks that Notify finds out that
// notifications do not arrive through PgBouncer in transaction pooling
// mode, and says so (package state then polls) instead of listening in
// vain.
func TestNotifyBehindPgBouncer(t *testing.T) {
	u := pgtest.URL(t)
	b := pgtest.StartBouncer(t, u)
	cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
	defer cancel()
	d, err := pgstate.Open(cctx, b.URL("default_query_exec_mode=exec", "pool_max_conns=4", "schema="+pgtest.Schema(t, u)), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	err = d.Notify(cctx, func(string) {})
	if !errors.Is(err, pgstate.ErrNoNotifications) {
		t.Fatalf("Notify through PgBouncer: %v, want ErrNoNotifications", err)
	}
}
