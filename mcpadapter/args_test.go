package mcpadapter_test

import (
	"strings"
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
		{"workflow_discover", `{"status":"bogus"}`, `status must be one of waiting, created, claimed, running, done, failed, got "bogus"`},
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

// TestTextIsWhatItIs: a string argument with bytes that are not UTF-8 or
// with a lone UTF-16 surrogate escape is a tool error naming it. Decoded
// naively, both become U+FFFD, and x\ud800 and x\udbff would be one key.
func TestTextIsWhatItIs(t *testing.T) {
	c, _, _ := newClient(t, nil)
	id := c.create("job", "")
	run := `"run_id":"` + id + `"`
	for _, bad := range []struct{ text, why string }{
		{`"x\ud800"`, `lone UTF-16 surrogate (\ud800)`},
		{`"x\udbff"`, `lone UTF-16 surrogate (\udbff)`},
		{`"x\uDC00y"`, `lone UTF-16 surrogate (\udc00)`},
		{`"\ud800\u0041"`, `lone UTF-16 surrogate (\ud800)`},
		{`"\\\ud800"`, `lone UTF-16 surrogate (\ud800)`},
		{"\"x\xff\"", "bytes that are not UTF-8"},
		{"\"\xed\xa0\x80\"", "bytes that are not UTF-8"}, // a surrogate encoded as UTF-8
	} {
		for _, tc := range []struct{ tool, field, args string }{
			{"state_set", "key", `"key":%s,"value":1`},
			{"state_set", "agent_id", `"key":"k","value":1,"agent_id":%s`},
			{"state_get", "key", `"key":%s`},
			{"state_delete", "key", `"key":%s`},
			{"state_list", "prefix", `"prefix":%s`},
			{"state_list", "cursor", `"cursor":%s`},
			{"workflow_create", "name", `"name":%s`},
			{"workflow_create", "tags", `"name":"n","tags":{"k":%s}`},
			{"workflow_create", "tags", `"name":"n","tags":{%s:"v"}`},
			{"workflow_discover", "tags", `"tags":{%s:"v"}`},
			{"workflow_claim", "run_id", `"run_id":%s,"agent_id":"A"`},
			{"workflow_claim", "agent_id", run + `,"agent_id":%s`},
			{"workflow_checkpoint", "agent_id", run + `,"step":1,"output":1,"agent_id":%s`},
			{"lease_acquire", "resource_id", `"resource_id":%s,"holder_id":"A","ttl_seconds":5`},
			{"lease_acquire", "holder_id", `"resource_id":"r","holder_id":%s,"ttl_seconds":5`},
			{"lease_release", "holder_id", `"resource_id":"r","holder_id":%s`},
			{"session_save", "session_id", `"session_id":%s,"context":{}`},
			{"history_log", "key", `"key":%s`},
		} {
			got := c.fail(tc.tool, "{"+strings.Replace(tc.args, "%s", bad.text, 1)+"}")
			if !strings.Contains(got, "'"+tc.tool+"': "+tc.field+" must be valid") || !strings.Contains(got, bad.why) {
				t.Errorf("%s with %s = %s %q: got %q, want an error naming %s (%s)", tc.tool, tc.field, tc.field, bad.text, got, tc.field, bad.why)
			}
		}
	}
	// Nothing was stored, and a real pair is a character like any other.
	equal(t, "keys after bad calls", c.ok("state_list", ``), `{"keys":[],"next_cursor":null}`)
	c.ok("state_set", `{"key":"x\ud83d\ude00","value":1}`)
	c.ok("state_set", `{"key":"x\\ud800","value":2}`) // a backslash, then "ud800": six ordinary characters
	equal(t, "keys", c.ok("state_list", ``), `{"keys":["x\\ud800","x😀"],"next_cursor":null}`)
}
