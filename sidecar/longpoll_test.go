package sidecar

import (
	"fmt"
	"testing"
	"time"
)

// A long-poll waits for its own timeout_seconds, however short the request
// timeout: the request timeout bounds the backend work, not the wait.
func TestLongPollOutlivesTheRequestTimeout(t *testing.T) {
	cfg := memConfig()
	cfg.RequestTimeout = 100 * time.Millisecond
	r := startHTTP(t, cfg)
	c := connect(t, r.URL, false)
	call(t, c, "state_set", map[string]any{"key": "k", "value": 1})
	got := make(chan map[string]any, 1)
	go func() {
		got <- call(t, c, "state_wait", map[string]any{"key": "k", "after_version": 1, "timeout_seconds": 30})
	}()
	eventually(t, "the waiter to park", func() bool { return r.store.Waiting() == 1 })
	<-time.After(3 * cfg.RequestTimeout) // past the request timeout: what this test is about
	call(t, c, "state_set", map[string]any{"key": "k", "value": 2})
	if res := <-got; res["changed"] != true || fmt.Sprint(res["version"]) != "2" {
		t.Errorf("state_wait past the request timeout: %v, want the write's version 2", res)
	}
}

// Long-polls do not take the slots of MaxConcurrentRequests: a full set of
// waiters must not hold back the write that wakes them.
func TestLongPollsLeaveRequestSlotsFree(t *testing.T) {
	cfg := memConfig()
	cfg.MaxConcurrentRequests = 1
	r := startHTTP(t, cfg)
	c := connect(t, r.URL, false)
	run := call(t, c, "workflow_create", map[string]any{"name": "job"})["run_id"].(string)
	const waiters = 3
	got := make(chan map[string]any, waiters)
	for range waiters {
		go func() {
			got <- call(t, c, "workflow_wait", map[string]any{"run_id": run, "until": []string{"claimed"}})
		}()
	}
	eventually(t, "the waiters to park", func() bool { return r.store.Waiting() == waiters })
	call(t, c, "workflow_claim", map[string]any{"run_id": run, "agent_id": "w"})
	for range waiters {
		if res := <-got; res["reached"] != true || res["status"] != "claimed" {
			t.Errorf("workflow_wait: %v", res)
		}
	}
}
