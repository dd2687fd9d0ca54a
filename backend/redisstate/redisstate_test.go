package redisstate_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/skipnote"
	"go.uber.org/goleak"
)

var ctx = context.Background()

// shared is the driver whose client every test of this run shares; each
// test makes drivers of its own over the client, with fresh prefixes.
var shared struct {
	once sync.Once
	d    *redisstate.Driver
	err  error
}

func TestMain(m *testing.M) {
	code := skipnote.Run(m)
	if shared.d != nil {
		_ = shared.d.Close()
	}
	if code == 0 {
		// No goroutine may outlive the tests (the shared client is closed
		// above, so its pool's goroutines end too).
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sharedClient returns the client of STATE_TEST_REDIS_URL, or skips.
func sharedClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	u := redistest.URL(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), redistest.Wait)
		defer cancel()
		shared.d, shared.err = redisstate.Open(ctx, u)
	})
	if shared.err != nil {
		t.Fatalf("opening %s: %v", redistest.EnvURL, shared.err)
	}
	return shared.d.Client()
}

// newDriver returns a driver over rdb with a prefix of its own, whose keys
// are deleted when the test ends. A prefix of its own matters: Sweep visits
// every namespace of a prefix, and the suite sweeps with tight retention.
func newDriver(t testing.TB, rdb redis.UniversalClient) *redisstate.Driver {
	t.Helper()
	prefix := redistest.Prefix()
	d := newDriverWithPrefix(t, rdb, prefix)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), redistest.Wait)
		defer cancel()
		if err := redistest.Purge(ctx, rdb, prefix); err != nil {
			t.Errorf("deleting the test's keys: %v", err)
		}
	})
	return d
}

// newDriverWithPrefix returns a driver over rdb with a given prefix, closed
// when the test ends.
func newDriverWithPrefix(t testing.TB, rdb redis.UniversalClient, prefix string) *redisstate.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), redistest.Wait)
	defer cancel()
	d, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: prefix})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestConformance(t *testing.T) {
	rdb := sharedClient(t)
	start := time.Now()
	backendtest.Run(t, func(t *testing.T) backend.Driver { return newDriver(t, rdb) })
	t.Cleanup(func() { t.Logf("conformance suite took %v", time.Since(start)) })
}
