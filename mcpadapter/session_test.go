package mcpadapter_test

import (
	"strings"
	"testing"
)

func TestSessions(t *testing.T) {
	c, _, _ := newClient(t, nil)
	equal(t, "session_restore of a missing session", c.ok("session_restore", `{"session_id":"s"}`),
		`{"found":false,"session_id":"s","context":null}`)
	const ctx = `{"llm_context":{"turns":[1,2]},"tokens":123456789012345678901234567890,"next":"security review"}`
	equal(t, "session_save", c.ok("session_save", `{"session_id":"s","context":`+ctx+`}`), `{"ok":true,"session_id":"s"}`)
	equal(t, "session_restore", c.ok("session_restore", `{"session_id":"s"}`), `{"found":true,"session_id":"s","context":`+ctx+`}`)
	c.ok("session_save", `{"session_id":"s","context":{}}`)
	equal(t, "a save replaces the snapshot", c.ok("session_restore", `{"session_id":"s"}`), `{"found":true,"session_id":"s","context":{}}`)
}

func TestHistoryLog(t *testing.T) {
	c, _, _ := newClient(t, nil)
	equal(t, "empty history", c.ok("history_log", ``), `{"entries":[],"total":0}`)
	c.ok("state_set", `{"key":"k","value":{"v":1},"agent_id":"A"}`)
	c.ok("state_set", `{"key":"k","value":{"v":2}}`)
	c.ok("state_delete", `{"key":"k"}`)
	c.ok("session_save", `{"session_id":"s","context":{}}`)
	id := c.create("job", "")
	c.ok("workflow_claim", `{"run_id":"`+id+`","agent_id":"A"}`)
	c.ok("lease_acquire", `{"resource_id":"r","holder_id":"A","ttl_seconds":1}`)

	res := c.ok("history_log", `{"key":"k"}`)
	equal(t, "total", field(t, res, "total"), "3")
	entries := field(t, res, "entries")
	for _, want := range []string{
		`"key":"k","new_value":null,"previous_value":{"v":2},"agent_id":null,"written_at":` + epoch + `.0,"op":"kv.delete"}`,
		`"key":"k","new_value":{"v":2},"previous_value":{"v":1},"agent_id":null,"written_at":` + epoch + `.0,"op":"kv.set"}`,
		`"key":"k","new_value":{"v":1},"previous_value":null,"agent_id":"A","written_at":` + epoch + `.0,"op":"kv.set"}`,
	} {
		i := strings.Index(entries, want)
		if i < 0 {
			t.Fatalf("history of k %s lacks (in order) %s", entries, want)
		}
		entries = entries[i+len(want):]
	}

	all := c.ok("history_log", `{"n":2}`)
	equal(t, "total with n=2", field(t, all, "total"), "2")
	if !strings.Contains(all, `"op":"lease.acquire"`) || !strings.Contains(all, `"op":"workflow.claim"`) {
		t.Errorf("newest two entries %s, want the lease acquire and the claim", all)
	}
	equal(t, "default n", field(t, c.ok("history_log", `{"key":null,"n":null}`), "total"), "7")
	c.wantErr("history_log", `{"n":0}`, "n must be >= 1, got 0")
	c.wantErr("history_log", `{"n":-3}`, "n must be >= 1, got -3")
	c.wantErr("history_log", `{"n":1001}`, "n must be at most 1000, got 1001")
}
