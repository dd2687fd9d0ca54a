package pgstate_test

import (
	"context"
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
// trip per statement.
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
				d, err := pgstate.New(cctx, pool, &pgstate.Options{Schema: pgtest.Schema(t, u)})
				if err != nil {
					t.Fatalf("New through PgBouncer: %v", err)
				}
				t.Cleanup(func() { _ = d.Close() })
				return d
			})
		})
	}
}
