package mcpadapter_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcpadapter"
)

// parked waits until n calls wait on st.
func parked(t *testing.T, st *state.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for st.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters parked, want %d", st.Waiting(), n)
		}
		time.Sleep(time.Millisecond) // polls a condition; no outcome depends on the duration
	}
}

func TestStateWait(t *testing.T) {
	c, st, _ := newClient(t, nil)
	c.ok("state_set", `{"key":"k","value":1}`)
	equal(t, "newer already", field(t, c.ok("state_wait", `{"key":"k","after_version":0}`), "changed"), "true")
	equal(t, "deadline", c.ok("state_wait", `{"key":"k","after_version":1,"timeout_seconds":0.05}`),
		`{"changed":false,"key":"k","value":1,"found":true,"version":1,"agent_id":null,"updated_at":`+epoch+`.0,"expires_at":null}`)
	equal(t, "deadline of a missing key", c.ok("state_wait", `{"key":"none","timeout_seconds":0.05}`),
		`{"changed":false,"key":"none","value":null,"found":false,"version":null,"agent_id":null,"updated_at":null,"expires_at":null}`)

	got := make(chan string, 1)
	go func() { got <- c.ok("state_wait", `{"key":"k","after_version":1,"timeout_seconds":60}`) }()
	parked(t, st, 1)
	if _, err := st.Set(t.Context(), "k", 2, state.WithAgent("w")); err != nil {
		t.Fatal(err)
	}
	equal(t, "woken by a write", <-got,
		`{"changed":true,"key":"k","value":2,"found":true,"version":2,"agent_id":"w","updated_at":`+epoch+`.0,"expires_at":null}`)

	go func() { got <- c.ok("state_wait", `{"key":"k","after_version":2}`) }()
	parked(t, st, 1)
	if _, err := st.Delete(t.Context(), "k"); err != nil {
		t.Fatal(err)
	}
	equal(t, "woken by a delete", <-got,
		`{"changed":true,"key":"k","value":null,"found":false,"version":null,"agent_id":null,"updated_at":null,"expires_at":null}`)
}

func TestStateWaitAnswersBeforeTheCallersDeadline(t *testing.T) {
	c, _, _ := newClient(t, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	equal(t, "cut by the caller's deadline", field(t, c.okCtx(ctx, "state_wait", `{"key":"k","timeout_seconds":60}`), "changed"), "false")
}

func TestWorkflowWait(t *testing.T) {
	c, st, _ := newClient(t, nil)
	id := field(t, c.ok("workflow_create", `{"name":"job"}`), "run_id")
	id = strings.Trim(id, `"`)
	equal(t, "already created", field(t, c.ok("workflow_wait", `{"run_id":"`+id+`","until":["created"]}`), "reached"), "true")
	res := c.ok("workflow_wait", `{"run_id":"`+id+`","timeout_seconds":0.05}`)
	equal(t, "deadline", field(t, res, "reached"), "false")
	equal(t, "status at the deadline", field(t, res, "status"), `"created"`)

	got := make(chan string, 1)
	go func() { got <- c.ok("workflow_wait", `{"run_id":"`+id+`","until":["running","done","failed"]}`) }()
	parked(t, st, 1)
	cl, err := st.ClaimRun(t.Context(), id, "w")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CheckpointRun(t.Context(), id, 1, "x", state.WithFence(cl.Fence)); err != nil {
		t.Fatal(err)
	}
	res = <-got
	equal(t, "woken", field(t, res, "reached"), "true")
	equal(t, "woken at", field(t, res, "status"), `"running"`)
}

func TestWaitBadArguments(t *testing.T) {
	c, _, _ := newClient(t, nil)
	for _, tc := range []struct{ tool, args, field string }{
		{"state_wait", `{"key":"k","timeout_seconds":61}`, "timeout_seconds must be at most 60"},
		{"state_wait", `{"key":"k","timeout_seconds":0}`, "timeout_seconds must be greater than 0"},
		{"state_wait", `{"key":"k","after_version":-1}`, "after_version must be >= 0"},
		{"state_wait", `{"after_version":1}`, "key is required"},
		{"workflow_wait", `{"run_id":"wf-1","until":["finished"]}`, `until: item 0 must be one of waiting, created, claimed, running, done, failed, got "finished"`},
		{"workflow_wait", `{"run_id":"wf-1","until":"done"}`, "until must be an array of strings"},
		{"workflow_wait", `{"run_id":"wf-1","until":["done","done"]}`, `until: item 1 repeats "done"`},
		{"workflow_wait", `{"run_id":"wf-000000000000"}`, "not found"},
	} {
		if got := c.fail(tc.tool, tc.args); !strings.Contains(got, tc.field) {
			t.Errorf("%s(%s) = %s, want it to say %q", tc.tool, tc.args, got, tc.field)
		}
	}
}

func TestLongPollTimeout(t *testing.T) {
	for _, tc := range []struct {
		tool string
		args any
		want time.Duration
		ok   bool
	}{
		{"state_wait", map[string]any{"timeout_seconds": 5.5}, 5500 * time.Millisecond, true},
		{"workflow_wait", map[string]any{}, mcpadapter.DefaultWaitTimeout, true},
		{"state_wait", map[string]any{"timeout_seconds": 600.0}, mcpadapter.MaxWaitTimeout, true},
		{"state_wait", "garbage", mcpadapter.DefaultWaitTimeout, true},
		{"state_get", map[string]any{"timeout_seconds": 5.0}, 0, false},
	} {
		got, ok := mcpadapter.LongPollTimeout(tc.tool, tc.args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("LongPollTimeout(%s, %v) = %v, %v; want %v, %v", tc.tool, tc.args, got, ok, tc.want, tc.ok)
		}
	}
}
