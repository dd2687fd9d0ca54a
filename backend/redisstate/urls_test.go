package redisstate_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/skipnote"
)

// TestOpenRejectsBadURLsBeforeConnecting needs no server: every mistake is
// reported before a connection is tried.
func TestOpenRejectsBadURLsBeforeConnecting(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:1/0?colour=blue":                   "unexpected option: colour",
		"redis://127.0.0.1:1/0?prefix=":                       "prefix must not be empty",
		"redis://127.0.0.1:1/0?prefix=a{b}":                   "must not contain '{' or '}'",
		"redis://127.0.0.1:1/0?max_batch=0":                   "max_batch must be a positive integer",
		"redis://127.0.0.1:1/0?senders=x":                     "senders must be a positive integer",
		"redis://127.0.0.1:1/0?cluster=maybe":                 "cluster must be true or false",
		"redis://127.0.0.1:1?cluster=true&master_name=m":      "exclude each other",
		"redis://127.0.0.1:1/0/1":                             "invalid URL path",
		"postgres://127.0.0.1:1/0":                            "scheme must be redis or rediss",
		"redis://127.0.0.1:1?addr=127.0.0.1:2&db_number=3":    "unexpected option: db_number",
		"redis://127.0.0.1:1?master_name=m&pool_size=lots":    "invalid pool_size",
		"redis://127.0.0.1:1/0?dial_timeout=forever":          "invalid dial_timeout",
		"redis://127.0.0.1:1/0?prefix=p&prefix=q&colour=blue": "unexpected option: colour",
	} {
		_, err := redisstate.Open(ctx, url)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want an error containing %q", url, err, want)
		}
	}
}

func TestSchemesAreRegistered(t *testing.T) {
	is := is.New(t)
	schemes := state.DefaultURLMux().Schemes()
	is.True(slices.Contains(schemes, redisstate.Scheme))    // redis:// opens this backend
	is.True(slices.Contains(schemes, redisstate.SchemeTLS)) // and rediss://
}

// TestStateOpenHonoursNamespaceAndPrefix opens a store the way the sidecar
// does, through state.Open and a URL.
func TestStateOpenHonoursNamespaceAndPrefix(t *testing.T) {
	is := is.New(t)
	prefix := redistest.Prefix()
	st, err := state.Open(ctx, withParams(redistest.URL(t), "namespace=app", "prefix="+prefix, "max_retries=1"))
	is.NoErr(err)
	t.Cleanup(func() { _ = redistest.Purge(ctx, sharedClient(t), prefix) })
	defer st.Close()
	is.Equal(st.Backend(), "redis")
	is.Equal(st.NamespaceName(), "app")
	_, err = st.Set(ctx, "k", 1)
	is.NoErr(err)
	n, err := sharedClient(t).Exists(ctx, "{"+prefix+":app}:r:k/k").Result()
	is.NoErr(err)
	is.Equal(n, int64(1)) // the entry lives under the prefix and namespace of the URL
}

// TestSentinel runs the conformance suite through a Sentinel failover
// client opened from a URL with master_name, against a master and a
// sentinel the test starts on spare loopback ports.
func TestSentinel(t *testing.T) {
	if os.Getenv(redistest.EnvSentinel) != "1" {
		skipnote.Note(redistest.EnvSentinel, "Redis Sentinel")
		t.Skipf("set %s=1 to run the conformance suite through a Sentinel this test starts (needs redis-server)", redistest.EnvSentinel)
	}
	start := time.Now()
	master := redistest.Start(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	d, err := redisstate.Open(ctx, sentinel.URL()+"?master_name=mymaster")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	rdb := d.Client()
	if _, ok := rdb.(*redis.Client); !ok {
		t.Fatalf("master_name did not open a failover client but a %T", rdb)
	}
	backendtest.Run(t, func(t *testing.T) backend.Driver { return newDriver(t, rdb) })
	t.Logf("Sentinel tests took %v", time.Since(start))
}
