package pgstate_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/internal/skipnote"
	"go.uber.org/goleak"
)

var ctx = context.Background()

// shared is the pool every test of this run shares; each test makes
// drivers of its own over it, in schemas of their own.
var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := skipnote.Run(m)
	if shared.pool != nil {
		shared.pool.Close()
	}
	if code == 0 {
		// No goroutine may outlive the tests (the shared pool is closed
		// above, so its health checker ends too).
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedPool returns the pool of STATE_TEST_POSTGRES_URL, or skips.
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := pgtest.URL(t)
	shared.once.Do(func() {
		cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
		defer cancel()
		shared.pool, shared.err = pgxpool.New(cctx, u)
		if shared.err == nil {
			shared.err = shared.pool.Ping(cctx)
		}
	})
	if shared.err != nil {
		t.Fatalf("connecting to %s: %v", pgtest.EnvURL, shared.err)
	}
	return shared.pool
}

// newDriver returns a driver over the shared pool in a schema of its own,
// dropped when the test ends. A schema of its own matters: Sweep visits
// every namespace of a schema, and the suite sweeps with tight retention.
func newDriver(t testing.TB) *pgstate.Driver {
	t.Helper()
	pool := sharedPool(t)
	schema := pgtest.Schema(t, pgtest.URL(t))
	cctx, cancel := context.WithTimeout(ctx, pgtest.Wait)
	defer cancel()
	d, err := pgstate.New(cctx, pool, &pgstate.Options{Schema: schema})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	sharedPool(t)
	start := time.Now()
	backendtest.Run(t, func(t *testing.T) backend.Driver { return newDriver(t) })
	t.Cleanup(func() { t.Logf("conformance suite took %v", time.Since(start)) })
}
