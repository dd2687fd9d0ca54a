package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/internal/s3test"
	"github.com/statesidecar/state/internal/skipnote"
)

// roundRobin is a load balancer without session affinity, as an
// http.RoundTripper: each request goes to the next replica in turn.
type roundRobin struct {
	replicas []*url.URL
	next     atomic.Int64
	hits     []atomic.Int64
	tr       *http.Transport
}

func newRoundRobin(t *testing.T, baseURLs ...string) *roundRobin {
	rr := &roundRobin{hits: make([]atomic.Int64, len(baseURLs)), tr: http.DefaultTransport.(*http.Transport).Clone()}
	// A connection dialed but never used holds http.Server.Shutdown for 5s
	// (it cannot tell it from a request about to arrive): close them first.
	t.Cleanup(rr.tr.CloseIdleConnections)
	for _, b := range baseURLs {
		u, err := url.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		rr.replicas = append(rr.replicas, u)
	}
	return rr
}

func (rr *roundRobin) RoundTrip(r *http.Request) (*http.Response, error) {
	i := int(rr.next.Add(1)-1) % len(rr.replicas)
	rr.hits[i].Add(1)
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = rr.replicas[i].Scheme, rr.replicas[i].Host
	out.Host = rr.replicas[i].Host
	return rr.tr.RoundTrip(out)
}

// client returns an MCP client whose every request goes through rr.
func (rr *roundRobin) client(t *testing.T, legacy bool) *client.Client {
	return connect(t, "http://replicas.invalid", legacy,
		transport.WithHTTPBasicClient(&http.Client{Transport: rr}))
}

// sharedBackends are the backends several replicas can share: one SQLite
// file always, and Redis when STATE_TEST_REDIS_URL is set. Each returns the
// configuration of a replica; all replicas of one call share the store.
func sharedBackends(t *testing.T) map[string]func() Config {
	db := filepath.Join(t.TempDir(), "shared.db")
	out := map[string]func() Config{
		"sqlite": func() Config {
			c := memConfig()
			c.Backend, c.DBPath = BackendSQLite, db
			return c
		},
	}
	// --- object-store backends (issue 23) ---
	// One directory, one bucket of gofakes3 in this process, and the S3
	// server of STATE_TEST_S3_URL (versitygw in CI) when it is set: each
	// replica's driver has a cache of its own, as a process would.
	s3test.SetEnv(t)
	stateDir := t.TempDir()
	out["file"] = func() Config {
		c := memConfig()
		c.Backend, c.StateDir = BackendFile, stateDir
		return c
	}
	fakeURL := s3test.NewFake(t, nil).URL("replicas")
	out["s3-gofakes3"] = func() Config {
		c := memConfig()
		c.Backend, c.S3URL = BackendS3, fakeURL
		return c
	}
	if s3URL := s3test.OptionalURL(t); s3URL != "" {
		out["s3"] = func() Config {
			c := memConfig()
			c.Backend, c.S3URL = BackendS3, s3URL
			return c
		}
	}
	// --- end object-store backends ---
	redisURL := os.Getenv("STATE_TEST_REDIS_URL")
	if redisURL == "" {
		skipnote.Note("STATE_TEST_REDIS_URL", "Redis")
		t.Log("Redis replicas skipped: set STATE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run them")
		return out
	}
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatalf("STATE_TEST_REDIS_URL: %v", err)
	}
	prefix := fmt.Sprintf("sidecar-test-%d:", time.Now().UnixNano())
	q := u.Query()
	q.Set("prefix", prefix)
	u.RawQuery = q.Encode()
	t.Cleanup(func() { deleteRedisPrefix(t, redisURL, prefix) })
	out["redis"] = func() Config {
		c := memConfig()
		c.Backend, c.RedisURL = BackendRedis, u.String()
		return c
	}
	return out
}

// deleteRedisPrefix leaves nothing of a test behind in a shared Redis: the
// keys under prefix, which redisstate puts in a hash tag "{prefix...".
func deleteRedisPrefix(t *testing.T, redisURL, prefix string) {
	o, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Logf("not cleaning Redis up (%v)", err)
		return
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		rdb.Del(ctx, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleaning Redis up: %v", err)
	}
}

// startReplicas starts two sidecars over one shared store.
func startReplicas(t *testing.T, cfg func() Config) (a, b *running) {
	return startHTTP(t, cfg()), startHTTP(t, cfg())
}

// Two stateless replicas over one store (one SQLite file; Redis) behind a
// round robin: no session affinity, and every call may land on either.
func TestTwoReplicasOneStore(t *testing.T) {
	for name, cfg := range sharedBackends(t) {
		t.Run(name, func(t *testing.T) { testTwoReplicas(t, cfg) })
	}
}

func testTwoReplicas(t *testing.T, cfg func() Config) {
	a, b := startReplicas(t, cfg)
	rr := newRoundRobin(t, a.URL, b.URL)

	for _, legacy := range []bool{true, false} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			c := rr.client(t, legacy)
			if got := toolNames(t, c); len(got) != 21 {
				t.Fatalf("tools/list through the balancer: %v", got)
			}
			key := fmt.Sprintf("rr/%v", legacy)
			// Consecutive calls alternate replicas: each read sees the other's write.
			for i := range 6 {
				call(t, c, "state_set", map[string]any{"key": key, "value": i})
				if got := call(t, c, "state_get", map[string]any{"key": key}); got["value"] != jsonNum(i) {
					t.Fatalf("write %d, then read on the other replica: %v", i, got)
				}
			}
			run := call(t, c, "workflow_create", map[string]any{"name": "pr-review", "tags": map[string]any{"pr": "42"}})
			claim := call(t, c, "workflow_claim", map[string]any{"run_id": run["run_id"], "agent_id": "w1"})
			call(t, c, "workflow_checkpoint", map[string]any{"run_id": run["run_id"], "step": 1,
				"output": map[string]any{"files": 12}, "agent_id": "w1", "fence": claim["fence"]})
			if got := call(t, c, "workflow_resume", map[string]any{"run_id": run["run_id"]}); got["last_step"] != jsonNum(1) {
				t.Errorf("resume on the other replica: %v", got)
			}
		})
	}
	if rr.hits[0].Load() == 0 || rr.hits[1].Load() == 0 {
		t.Fatalf("both replicas must have served requests: %d, %d", rr.hits[0].Load(), rr.hits[1].Load())
	}
}

func jsonNum(i int) any { return json.Number(fmt.Sprint(i)) }

// Agents racing to claim the same runs through two replicas: exactly one
// wins each run, and every loser is told who holds it.
func TestClaimRaceAcrossReplicas(t *testing.T) {
	for name, cfg := range sharedBackends(t) {
		t.Run(name, func(t *testing.T) { testClaimRace(t, cfg) })
	}
}

func testClaimRace(t *testing.T, cfg func() Config) {
	a, b := startReplicas(t, cfg)
	rr := newRoundRobin(t, a.URL, b.URL)
	const agents, runs = 8, 5
	clients := make([]*client.Client, agents)
	for i := range clients {
		clients[i] = rr.client(t, i%2 == 0)
	}
	for r := range runs {
		run := call(t, clients[0], "workflow_create", map[string]any{"name": fmt.Sprintf("race-%d", r)})
		id := run["run_id"]
		results := make([]map[string]any, agents)
		errs := make([]error, agents)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range clients {
			wg.Go(func() {
				<-start
				results[i], errs[i] = tryCall(t.Context(), c, "workflow_claim",
					map[string]any{"run_id": id, "agent_id": fmt.Sprintf("agent-%d", i)})
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		var winners []string
		for _, res := range results {
			if res["claimed"] == true {
				winners = append(winners, res["agent_id"].(string))
			}
		}
		if len(winners) != 1 {
			t.Fatalf("run %v: %d winners %v, want exactly 1: %v", id, len(winners), winners, results)
		}
		for _, res := range results {
			if res["claimed"] == false && !strings.Contains(fmt.Sprint(res["reason"]), "(agent: "+winners[0]+")") {
				t.Errorf("run %v: a loser's reason must name the holder %s: %v", id, winners[0], res["reason"])
			}
		}
		status := call(t, clients[1], "workflow_status", map[string]any{"run_id": id})
		if status["agent_id"] != winners[0] || status["status"] != "claimed" {
			t.Errorf("run %v: status %v, want claimed by %s", id, status, winners[0])
		}
	}
	for _, r := range []*running{a, b} {
		if n := metric(t, r.URL, MetricToolCalls+`{tool="workflow_claim"}`); n == 0 {
			t.Errorf("replica %s served no claim", r.URL)
		}
	}
}
