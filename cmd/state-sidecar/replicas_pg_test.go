package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/pgtest"
)

// TestPostgresReplicas runs three sidecar processes over one PostgreSQL
// database (a schema of the test's own) and drives them as agents behind a
// load balancer would: any call may reach any replica.
func TestPostgresReplicas(t *testing.T) {
	dbURL := pgtest.URL(t)
	// The 100 racing agents all come from 127.0.0.1, which a sidecar without
	// tokens takes for one tenant: the race is about claims, not fair share,
	// so the per-tenant cap is lifted.
	env := []string{"STATE_BACKEND=postgres", "DATABASE_URL=" + pgtest.WithParams(t, dbURL, "schema="+pgtest.Schema(t, dbURL)),
		"SIDECAR_TENANT_MAX_CONCURRENT_REQUESTS=0"}
	procs := make([]*proc, 3)
	bases := make([]string, 3)
	for i := range procs {
		procs[i], bases[i] = startHTTP(t, env...)
	}
	c := newToolClient()
	t.Run("ClaimRace", func(t *testing.T) { testPGClaimRace(t, c, bases) })
	t.Run("LeaseRace", func(t *testing.T) { testPGLeaseRace(t, c, bases) })
	t.Run("KilledReplica", func(t *testing.T) { testPGKilledReplica(t, c, procs, bases) })
}

// 100 agents race to claim each of 20 runs, through the three replicas in
// turn, all starting at once: every run has exactly one winner, the one its
// status names, and every loser is told who holds it.
func testPGClaimRace(t *testing.T, c *toolClient, bases []string) {
	const agents, runs = 100, 20
	ids := make([]string, runs)
	for r := range ids {
		ids[r] = mustTool(t, c, bases[r%3], "workflow_create", map[string]any{"name": fmt.Sprintf("race-%d", r)})["run_id"].(string)
	}
	winners := make([][]string, runs)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, agents)
	for a := range agents {
		wg.Go(func() {
			<-start
			agent := fmt.Sprintf("agent-%d", a)
			for k := range runs {
				r := (a + k) % runs // each agent goes round the runs from a different one
				res, isErr, err := c.call(t.Context(), bases[(a+k)%3], "workflow_claim", map[string]any{"run_id": ids[r], "agent_id": agent})
				if err != nil || isErr {
					errs <- fmt.Errorf("%s claiming %s: %v %v", agent, ids[r], err, res)
					return
				}
				if res["claimed"] == true {
					mu.Lock()
					winners[r] = append(winners[r], agent)
					mu.Unlock()
				} else if res["reason"] == nil || res["reason"] == "" {
					errs <- fmt.Errorf("%s lost %s without a reason: %v", agent, ids[r], res)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for r, w := range winners {
		if len(w) != 1 {
			t.Errorf("run %s: %d winners %v, want exactly one", ids[r], len(w), w)
			continue
		}
		st := mustTool(t, c, bases[r%3], "workflow_status", map[string]any{"run_id": ids[r]})
		if st["agent_id"] != w[0] || st["status"] != "claimed" {
			t.Errorf("run %s: status %v, but %s won the claim", ids[r], st, w[0])
		}
	}
	if p := c.peak.Load(); p < 10 {
		t.Errorf("at most %d claims were in flight at once: the race did not race", p)
	} else {
		t.Logf("%d claims, up to %d in flight at once", agents*runs, p)
	}
}

// 100 holders race for one lease through the three replicas: exactly one
// gets it, and every other is told who holds it.
func testPGLeaseRace(t *testing.T, c *toolClient, bases []string) {
	const holders = 100
	var got atomic.Int64
	var winner atomic.Value
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]map[string]any, holders)
	errs := make([]error, holders)
	c.peak.Store(0)
	for h := range holders {
		wg.Go(func() {
			<-start
			holder := fmt.Sprintf("holder-%d", h)
			res, isErr, err := c.call(t.Context(), bases[h%3], "lease_acquire",
				map[string]any{"resource_id": "the-lock", "holder_id": holder, "ttl_seconds": 60})
			if err != nil || isErr {
				errs[h] = fmt.Errorf("%s: %v %v", holder, err, res)
				return
			}
			results[h] = res
			if res["acquired"] == true {
				got.Add(1)
				winner.Store(holder)
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got.Load() != 1 {
		t.Fatalf("%d holders acquired the lease, want exactly one", got.Load())
	}
	for h, res := range results {
		if res["acquired"] != true && res["holder"] != winner.Load() {
			t.Errorf("holder-%d was refused naming %v, but %v holds the lease", h, res["holder"], winner.Load())
		}
	}
	t.Logf("up to %d acquires in flight at once", c.peak.Load())
}

// A worker claims a run through replica 0 and checkpoints step 1; replica 0
// is killed (SIGKILL) mid-run. Once the claim expires, another agent claims
// the run through replica 1 with a higher fence and resumes from step 1; the
// stale worker, retrying through replica 2 with its old fence, is refused;
// its successor's checkpoint goes through.
func testPGKilledReplica(t *testing.T, c *toolClient, procs []*proc, bases []string) {
	id := mustTool(t, c, bases[0], "workflow_create", map[string]any{"name": "crash"})["run_id"].(string)
	first := mustTool(t, c, bases[0], "workflow_claim", map[string]any{"run_id": id, "agent_id": "w1", "claim_ttl_seconds": 2})
	if first["claimed"] != true {
		t.Fatalf("first claim: %v", first)
	}
	mustTool(t, c, bases[0], "workflow_checkpoint", map[string]any{"run_id": id, "step": 1, "output": map[string]any{"done": 1},
		"agent_id": "w1", "fence": first["fence"]})
	if err := procs[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-procs[0].done

	// The claim outlives its replica until it expires (by the database's
	// clock); then w2 takes it over.
	var second map[string]any
	deadline := time.Now().Add(wait)
	for {
		second = mustTool(t, c, bases[1], "workflow_claim", map[string]any{"run_id": id, "agent_id": "w2"})
		if second["claimed"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead replica's claim was never taken over: %v", second)
		}
		time.Sleep(100 * time.Millisecond) // polling a real claim expiry
	}
	f1, _ := first["fence"].(json.Number).Int64()
	f2, _ := second["fence"].(json.Number).Int64()
	if f2 <= f1 {
		t.Errorf("takeover fence %d is not above the crashed worker's %d", f2, f1)
	}
	if second["attempt"] != json.Number("2") {
		t.Errorf("takeover attempt %v, want 2", second["attempt"])
	}
	if r := mustTool(t, c, bases[1], "workflow_resume", map[string]any{"run_id": id}); r["last_step"] != json.Number("1") {
		t.Errorf("the successor resumes at %v, want step 1", r["last_step"])
	}
	stale, isErr, err := c.call(t.Context(), bases[2], "workflow_checkpoint", map[string]any{"run_id": id, "step": 2,
		"output": map[string]any{"by": "w1"}, "agent_id": "w1", "fence": first["fence"]})
	if err != nil {
		t.Fatal(err)
	}
	if !isErr {
		t.Fatalf("the stale worker's checkpoint was accepted: %v", stale)
	}
	t.Logf("stale checkpoint refused: %v", stale)
	mustTool(t, c, bases[2], "workflow_checkpoint", map[string]any{"run_id": id, "step": 2, "output": map[string]any{"by": "w2"},
		"agent_id": "w2", "fence": second["fence"], "status": "done"})
	r := mustTool(t, c, bases[1], "workflow_resume", map[string]any{"run_id": id})
	outs, _ := r["step_outputs"].(map[string]any)
	if step2, _ := outs["2"].(map[string]any); step2["by"] != "w2" {
		t.Errorf("step 2's output is %v, want the successor's", outs["2"])
	}
}

// toolClient calls tools over HTTP from any goroutine, counting the calls
// in flight at once.
type toolClient struct {
	hc       *http.Client
	inFlight atomic.Int64
	peak     atomic.Int64
}

func newToolClient() *toolClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 128
	return &toolClient{hc: &http.Client{Transport: tr, Timeout: wait}}
}

// call calls a tool and returns its structured result and whether it is a
// tool error; err is a transport or protocol failure.
func (c *toolClient) call(ctx context.Context, baseURL, name string, args map[string]any) (map[string]any, bool, error) {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/mcp", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, false, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, false, fmt.Errorf("POST /mcp: %d %s", resp.StatusCode, b)
	}
	var m struct {
		Result *struct {
			IsError           bool              `json:"isError"`
			StructuredContent map[string]any    `json:"structuredContent"`
			Content           []json.RawMessage `json:"content"`
		} `json:"result"`
		Error json.RawMessage `json:"error"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m.Result == nil {
		return nil, false, fmt.Errorf("%s: response %s: %v", name, b, err)
	}
	if m.Result.IsError {
		return map[string]any{"content": string(bytes.Join(toBytes(m.Result.Content), nil))}, true, nil
	}
	return m.Result.StructuredContent, false, nil
}

func toBytes(rs []json.RawMessage) [][]byte {
	out := make([][]byte, len(rs))
	for i, r := range rs {
		out[i] = r
	}
	return out
}

// mustTool calls a tool from the test goroutine and fails the test on any
// error.
func mustTool(t *testing.T, c *toolClient, baseURL, name string, args map[string]any) map[string]any {
	t.Helper()
	res, isErr, err := c.call(t.Context(), baseURL, name, args)
	if err != nil || isErr {
		t.Fatalf("%s(%v): %v %v", name, args, err, res)
	}
	return res
}
