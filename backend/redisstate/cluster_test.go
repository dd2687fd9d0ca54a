package redisstate_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/skipnote"
)

// clusterURL returns the URL of the Redis Cluster to test against, starting
// one of three masters on spare loopback ports when STATE_TEST_REDIS_CLUSTER
// is 1, or skips.
func clusterURL(t *testing.T) string {
	t.Helper()
	v := os.Getenv(redistest.EnvCluster)
	switch {
	case v == "":
		skipnote.Note(redistest.EnvCluster, "Redis Cluster")
		t.Skipf("set %s=1 to start a three-master Redis Cluster for this test (needs redis-server and redis-cli), "+
			"or to redis://host:port?addr=host2:port&addr=host3:port to use one", redistest.EnvCluster)
	case v == "1":
		start := time.Now()
		addrs := redistest.StartCluster(t, 3)
		t.Logf("started a cluster of %s in %v", strings.Join(addrs, ", "), time.Since(start))
		return "redis://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	}
	return v
}

// TestCluster runs the conformance suite (the native-path comparison
// included) and the replica races against a Redis Cluster: every script
// must stay in its namespace's slot, and namespaces spread over the
// masters.
func TestCluster(t *testing.T) {
	u := clusterURL(t)
	start := time.Now()
	t.Cleanup(func() { t.Logf("cluster tests took %v", time.Since(start)) })
	d, err := redisstate.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	rdb := d.Client()
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Fatalf("%s did not open a cluster client but a %T", u, rdb)
	}
	t.Run("Conformance", func(t *testing.T) {
		backendtest.Run(t, func(t *testing.T) backend.Driver { return newDriver(t, rdb) })
	})
	t.Run("Replicas", func(t *testing.T) { testReplicas(t, u) })
	t.Run("NamespacesSpreadOverMasters", func(t *testing.T) {
		c := rdb.(*redis.ClusterClient)
		masters := map[string]bool{}
		for _, ns := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			n, err := c.MasterForKey(context.Background(), "{"+redisstate.DefaultPrefix+":"+ns+"}")
			if err != nil {
				t.Fatal(err)
			}
			masters[n.Options().Addr] = true
		}
		if len(masters) < 2 {
			t.Errorf("eight namespaces all live on one master: %v", masters)
		}
	})
}
