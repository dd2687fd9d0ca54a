package mcpadapter_test

import (
	"testing"
)

// TestBadArguments checks that every kind of bad argument is a tool error
// naming the parameter, never a protocol error or a crash.
func TestBadArguments(t *testing.T) {
	c, _, _ := newClient(t, nil)
	id := c.create("job", "")
	run := `"run_id":"` + id + `"`
	for _, tc := range []struct{ tool, args, msg string }{
		// Missing, null and unknown arguments.
		{"state_set", `{"value":1}`, "key is required"},
		{"state_set", `{"key":null,"value":1}`, "key is required"},
		{"state_set", `{"key":"k"}`, "value is required"},
		{"state_set", `{"key":"k","value":1,"ttl":5}`, "unexpected argument 'ttl' (this tool takes key, value, ttl_seconds, agent_id, if_version)"},
		{"sidecar_health", `{"verbose":true}`, "unexpected argument 'verbose' (this tool takes no arguments)"},
		{"workflow_checkpoint", `{` + run + `,"step":1}`, "output is required"},
		{"workflow_claim", `{` + run + `}`, "agent_id is required"},
		{"lease_acquire", `{"resource_id":"r","holder_id":"A"}`, "ttl_seconds is required"},
		{"session_save", `{"session_id":"s","context":null}`, "context is required"},
		{"workflow_create", `{"tags":{}}`, "name is required"},
		// Arguments that are not an object.
		{"state_get", `["k"]`, "arguments must be a JSON object, got an array"},
		{"state_get", `"k"`, "arguments must be a JSON object, got a string"},
		// Wrong JSON kinds.
		{"state_set", `{"key":5,"value":1}`, "key must be a string, got a number"},
		{"state_get", `{"key":{"a":1}}`, "key must be a string, got an object"},
		{"state_set", `{"key":"k","value":1,"agent_id":["A"]}`, "agent_id must be a string, got an array"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":"10"}`, "ttl_seconds must be a number of seconds, got a string"},
		{"state_set", `{"key":"k","value":1,"if_version":true}`, "if_version must be an integer, got a boolean"},
		{"workflow_checkpoint", `{` + run + `,"step":"1","output":1}`, "step must be an integer, got a string"},
		{"workflow_create", `{"name":"n","tags":[]}`, "tags must be an object of strings, got an array"},
		{"workflow_create", `{"name":"n","tags":{"a":1}}`, `tags must be an object of strings: the value of "a" is a number`},
		{"workflow_discover", `{"tags":{"a":null}}`, `tags must be an object of strings: the value of "a" is null`},
		{"workflow_discover", `{"claimable":"yes"}`, "claimable must be true or false, got a string"},
		{"session_save", `{"session_id":"s","context":[1]}`, "context must be a JSON object, got an array"},
		{"session_save", `{"session_id":"s","context":"{}"}`, "context must be a JSON object, got a string"},
		{"history_log", `{"n":"3"}`, "n must be an integer, got a string"},
		// Out of range.
		{"state_set", `{"key":"","value":1}`, "key must not be empty"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":0}`, "ttl_seconds must be greater than 0, got 0"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":-1.5}`, "ttl_seconds must be greater than 0, got -1.5"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":0.0004}`, "ttl_seconds must be at least 0.001 (one millisecond), got 0.0004"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":1e300}`, "ttl_seconds is too large, got 1e300"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":4000000000}`, "ttl_seconds must be at most 100 years, got 4000000000 seconds"},
		{"state_set", `{"key":"k","value":1,"if_version":-1}`, "if_version must be >= 0, got -1"},
		{"state_set", `{"key":"k","value":1,"if_version":1.5}`, "if_version must be an integer, got 1.5"},
		{"state_set", `{"key":"k","value":1,"if_version":99999999999999999999}`, "if_version is out of range, got 99999999999999999999"},
		{"workflow_checkpoint", `{` + run + `,"step":1.5,"output":1}`, "step must be an integer, got 1.5"},
		{"workflow_checkpoint", `{` + run + `,"step":-1,"output":1}`, "step must be >= 0, got -1"},
		{"workflow_checkpoint", `{` + run + `,"step":9007199254740993,"output":1}`, "step must be between 0 and 2^53, got 9007199254740993"},
		{"workflow_checkpoint", `{` + run + `,"step":1,"output":1,"fence":0}`, "fence must be >= 1, got 0"},
		{"workflow_checkpoint", `{` + run + `,"step":1,"output":1,"status":"running"}`, `status must be one of done, failed, got "running"`},
		{"workflow_discover", `{"status":"bogus"}`, `status must be one of created, claimed, running, done, failed, got "bogus"`},
		{"workflow_discover", `{"limit":0}`, "limit must be >= 1, got 0"},
		{"workflow_discover", `{"limit":5000}`, "limit must be between 1 and 1000, got 5000"},
		{"workflow_list", `{"cursor":"!"}`, "cursor is not a cursor this store returned"},
		{"workflow_claim", `{` + run + `,"agent_id":"A","claim_ttl_seconds":0}`, "claim_ttl_seconds must be greater than 0, got 0"},
		{"workflow_claim", `{` + run + `,"agent_id":"A","claim_ttl_seconds":4000000000}`, "claim_ttl_seconds must be at most 100 years, got 4000000000 seconds"},
		{"workflow_claim", `{` + run + `,"agent_id":""}`, "agent_id must not be empty"},
		{"lease_renew", `{"resource_id":"r","holder_id":"A","ttl_seconds":-5}`, "ttl_seconds must be greater than 0, got -5"},
		{"history_log", `{"n":2.5}`, "n must be an integer, got 2.5"},
	} {
		c.wantErr(tc.tool, tc.args, tc.msg)
	}
	// Nothing was stored by the rejected calls.
	equal(t, "keys after bad calls", c.ok("state_list", ``), `{"keys":[],"next_cursor":null}`)
	equal(t, "sessions after bad calls", field(t, c.ok("sidecar_health", ``), "session_count"), "0")
}

// TestLenientArguments checks what the Python sidecar accepted and agents
// written for it may send: nulls for optional arguments, integral numbers
// written as floats, "" for no status filter.
func TestLenientArguments(t *testing.T) {
	c, _, _ := newClient(t, nil)
	equal(t, "optional nulls", c.ok("state_set", `{"key":"k","value":1,"ttl_seconds":null,"agent_id":null,"if_version":null}`),
		`{"ok":true,"version":1}`)
	id := c.create("job", "")
	equal(t, "step 3.0", c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":3.0,"output":1}`), `{"ok":true,"run_id":"`+id+`","step":3}`)
	equal(t, "step 4e0", c.ok("workflow_checkpoint", `{"run_id":"`+id+`","step":4e0,"output":1}`), `{"ok":true,"run_id":"`+id+`","step":4}`)
	if res := c.ok("workflow_discover", `{"status":"","tags":{}}`); field(t, res, "runs") == "[]" {
		t.Errorf(`workflow_discover(status "") = %s, want every run`, res)
	}
	equal(t, "no arguments object", c.ok("state_list", `null`), `{"keys":["k"],"next_cursor":null}`)
}
