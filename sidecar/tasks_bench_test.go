package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/statesidecar/state/internal/storetest"
)

// BenchmarkTasks measures what a task costs against the same call made
// plainly, on each backend, in process (no HTTP): the tool is workflow_wait
// on a finished run, which answers at once, so that the call itself is the
// same small read either way.
//
//   - plain_wait: the call, through mcp-go's HandleMessage; plain_get and
//     plain_set: state_get (one read) and state_set (one commit), for scale;
//   - create: a task-augmented call answered by the front (the run and the
//     task's record committed), its execution left out of the timing;
//   - get: tasks/get of a task;
//   - roundtrip: create, then tasks/result until the task is done: the
//     whole life of a task (claim, call, recorded result, finished run).
//
// Each iteration does one of each, in turn; the metrics are the mean
// microseconds of each and the ratios. go test -run '^$' -bench
// BenchmarkTasks -benchtime 500x -count 5 ./sidecar
// (with STATE_TEST_REDIS_URL and STATE_TEST_POSTGRES_URL set for those).
func BenchmarkTasks(b *testing.B) {
	for _, name := range storetest.Names {
		b.Run(name, func(b *testing.B) {
			loc := storetest.New(b, name)
			if loc.Skip != "" {
				b.Skip(loc.Skip)
			}
			cfg := memConfig()
			cfg.storeURL = loc.URL
			cfg.Tasks.MaxLive = 1 << 30
			sc, err := New(context.Background(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				b.Fatal(err)
			}
			defer sc.Close()
			ctx := context.Background()
			send := func(msg string) map[string]any {
				var out map[string]any
				resp := sc.mcp.HandleMessage(ctx, []byte(msg))
				raw, _ := json.Marshal(resp)
				_ = json.Unmarshal(raw, &out)
				return out
			}
			result := func(out map[string]any) map[string]any {
				b.Helper()
				r, _ := out["result"].(map[string]any)
				sc, _ := r["structuredContent"].(map[string]any)
				if sc == nil {
					b.Fatalf("no result: %v", out)
				}
				return sc
			}
			run := result(send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workflow_create","arguments":{"name":"bench"}}}`))["run_id"]
			claim := result(send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workflow_claim","arguments":{"run_id":%q,"agent_id":"b"}}}`, run)))
			result(send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workflow_checkpoint","arguments":{"run_id":%q,"step":1,"output":1,"agent_id":"b","fence":%v,"status":"done"}}}`, run, claim["fence"])))

			plain := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workflow_wait","arguments":{"run_id":%q}}}`, run)
			result(send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1}}}`))
			plainGet := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_get","arguments":{"key":"k"}}}`
			plainSet := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":2}}}`
			task := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workflow_wait","arguments":{"run_id":%q},"task":{"ttl":600000}}}`, run)
			create := func() string {
				reply, _, ok := sc.tasks.HandleMessage(ctx, []byte(task), nil)
				var m struct {
					Result struct {
						Task struct{ TaskID string } `json:"task"`
					} `json:"result"`
				}
				if !ok || json.Unmarshal(reply, &m) != nil || m.Result.Task.TaskID == "" {
					b.Fatalf("create: %s", reply)
				}
				return m.Result.Task.TaskID
			}
			tasksCall := func(method, id string) []byte {
				reply, _, _ := sc.tasks.HandleMessage(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"`+method+`","params":{"taskId":"`+id+`"}}`), nil)
				return reply
			}
			idle := func() {
				deadline := time.Now().Add(wait)
				for sc.tasks.Running() > 0 && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}

			// Every kind of operation once per iteration, one after the other,
			// so that each ratio compares operations made at the same moment
			// (the machine is shared: its speed drifts between runs).
			var took [6]time.Duration
			timed := func(i int, f func()) {
				t0 := time.Now()
				f()
				took[i] += time.Since(t0)
			}
			getID := create()
			idle()
			for b.Loop() {
				timed(0, func() { mustResult(b, send(plain)) })
				timed(1, func() { mustResult(b, send(plainGet)) })
				timed(2, func() { mustResult(b, send(plainSet)) })
				timed(3, func() { create() })
				idle() // the task's execution is not the creation's cost
				timed(4, func() { tasksCall("tasks/get", getID) })
				timed(5, func() {
					id := create()
					var m struct {
						Result map[string]any `json:"result"`
					}
					if err := json.Unmarshal(tasksCall("tasks/result", id), &m); err != nil || m.Result == nil {
						b.Fatalf("tasks/result: %v", m)
					}
				})
				idle()
			}
			us := func(i int) float64 { return float64(took[i].Nanoseconds()) / float64(b.N) / 1e3 }
			for i, name := range []string{"plain_wait", "plain_get", "plain_set", "create", "get", "roundtrip"} {
				b.ReportMetric(us(i), name+"_us")
			}
			b.ReportMetric(us(3)/us(0), "create/plain_wait")
			b.ReportMetric(us(3)/us(2), "create/plain_set")
			b.ReportMetric(us(4)/us(0), "get/plain_wait")
			b.ReportMetric(us(4)/us(1), "get/plain_get")
			b.ReportMetric(us(5)/us(0), "roundtrip/plain_wait")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// mustResult fails b unless out is a JSON-RPC result.
func mustResult(b *testing.B, out map[string]any) {
	b.Helper()
	if out["result"] == nil {
		b.Fatal(out)
	}
}
