package sidecar

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
)

// roundRobin is a load balancer without session affinity, as an
// http.RoundTripper: each request goes to the next replica in turn.
type roundRobin struct {
	replicas []*url.URL
	next     atomic.Int64
	hits     []atomic.Int64
}

func newRoundRobin(t *testing.T, baseURLs ...string) *roundRobin {
	rr := &roundRobin{hits: make([]atomic.Int64, len(baseURLs))}
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
	return http.DefaultTransport.RoundTrip(out)
}

// client returns an MCP client whose every request goes through rr.
func (rr *roundRobin) client(t *testing.T, legacy bool) *client.Client {
	return connect(t, "http://replicas.invalid", legacy,
		transport.WithHTTPBasicClient(&http.Client{Transport: rr}))
}

func sqliteConfig(t *testing.T, path string) Config {
	c := memConfig()
	c.Backend, c.DBPath = BackendSQLite, path
	return c
}

// Two stateless replicas over one SQLite file behind a round robin: no
// session affinity, and every call may land on either.
func TestTwoReplicasOneSQLiteFile(t *testing.T) {
	db := filepath.Join(t.TempDir(), "shared.db")
	a, b := startHTTP(t, sqliteConfig(t, db)), startHTTP(t, sqliteConfig(t, db))
	rr := newRoundRobin(t, a.URL, b.URL)

	for _, legacy := range []bool{true, false} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			c := rr.client(t, legacy)
			if got := toolNames(t, c); len(got) != 19 {
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
	db := filepath.Join(t.TempDir(), "race.db")
	a, b := startHTTP(t, sqliteConfig(t, db)), startHTTP(t, sqliteConfig(t, db))
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
