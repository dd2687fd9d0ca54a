package main

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTakeoverTime measures how long after a SIGKILL of the replica
// running a task another replica takes the task over, with the default
// task claim TTL (15 s, a heartbeat every 5 s, a sweep every 2 s): two
// sidecars over one SQLite file, a workflow_wait task on the first, the
// first killed at a random moment of its heartbeat cycle, the time until
// the second's state_sidecar_tasks_total{event="taken_over"} goes up. It
// takes a minute or two, so it runs only when asked:
//
//	STATE_MEASURE_TAKEOVER=5 go test -run TestTakeoverTime -v ./cmd/state-sidecar
//
// (the value is the number of kills). It reports; it asserts no time.
func TestTakeoverTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STATE_MEASURE_TAKEOVER"))
	if n < 1 {
		t.Skip("set STATE_MEASURE_TAKEOVER=<kills> to measure the takeover time")
	}
	env := []string{"DB_PATH=" + filepath.Join(t.TempDir(), "takeover.db")}
	pa, a := startHTTP(t, env...)
	_, b := startHTTP(t, env...)
	var took []time.Duration
	for i := range n {
		run := tool(t, b, "workflow_create", map[string]any{"name": "takeover"})
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "workflow_wait", "arguments": map[string]any{"run_id": run["run_id"]}, "task": map[string]any{"ttl": 600000}}})
		if res := rpc(t, a, string(body)); res["result"] == nil {
			t.Fatalf("create: %v", res)
		}
		for gauge(t, a, "state_sidecar_tasks_running") != 1 {
			time.Sleep(10 * time.Millisecond)
		}
		// Kill at a random point of the 5 s heartbeat cycle.
		time.Sleep(time.Duration(rand.Int64N(int64(5 * time.Second))))
		before := gauge(t, b, `state_sidecar_tasks_total{event="taken_over"}`)
		if err := pa.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		<-pa.done
		for gauge(t, b, `state_sidecar_tasks_total{event="taken_over"}`) == before {
			if time.Since(killed) > 2*time.Minute {
				t.Fatal("no takeover within two minutes")
			}
			time.Sleep(20 * time.Millisecond)
		}
		took = append(took, time.Since(killed))
		t.Logf("kill %d: taken over after %v", i+1, took[i].Round(10*time.Millisecond))
		pa, a = startHTTP(t, env...)
	}
	slices.Sort(took)
	t.Logf("takeover after SIGKILL, %d kills: median %v, min %v, max %v", n,
		took[n/2].Round(10*time.Millisecond), took[0].Round(10*time.Millisecond), took[n-1].Round(10*time.Millisecond))
}

// gauge reads one series of a sidecar's /metrics (0 when absent).
func gauge(t *testing.T, base, series string) float64 {
	t.Helper()
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
