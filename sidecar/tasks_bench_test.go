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
// go test -run '^$' -bench BenchmarkTasks -benchtime 2000x ./sidecar
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

			for _, p := range []struct{ name, msg string }{{"plain_get", plainGet}, {"plain_set", plainSet}, {"plain_wait", plain}} {
				b.Run(p.name, func(b *testing.B) {
					for b.Loop() {
						if r := send(p.msg); r["result"] == nil {
							b.Fatal(r)
						}
					}
				})
			}
			b.Run("create", func(b *testing.B) {
				// The reply alone: each task's execution runs while the
				// timer is stopped.
				for range b.N {
					create()
					b.StopTimer()
					idle()
					b.StartTimer()
				}
			})
			b.Run("get", func(b *testing.B) {
				id := create()
				idle()
				for b.Loop() {
					if r := tasksCall("tasks/get", id); len(r) == 0 {
						b.Fatal("no answer")
					}
				}
			})
			b.Run("roundtrip", func(b *testing.B) {
				for b.Loop() {
					id := create()
					var m struct {
						Result map[string]any `json:"result"`
					}
					if err := json.Unmarshal(tasksCall("tasks/result", id), &m); err != nil || m.Result == nil {
						b.Fatalf("tasks/result: %v", m)
					}
				}
				b.StopTimer()
				idle()
			})
		})
	}
}
