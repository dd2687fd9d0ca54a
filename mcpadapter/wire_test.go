package mcpadapter_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// wire sends one tools/call to s as bytes on the wire, through
// PrepareMessage when prepare is set, and returns the JSON-RPC response.
func wire(t *testing.T, s *server.MCPServer, prepare bool, tool, args string) string {
	t.Helper()
	msg := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
	if prepare {
		msg = mcpadapter.PrepareMessage(msg)
	}
	b, err := json.Marshal(s.HandleMessage(t.Context(), msg))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// toolText returns the text of a tool result in a JSON-RPC response, and
// whether it is a tool error; it fails on a protocol error.
func toolText(t *testing.T, resp string) (string, bool) {
	t.Helper()
	var m struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	d := json.NewDecoder(strings.NewReader(resp))
	d.UseNumber()
	if err := d.Decode(&m); err != nil || m.Result == nil || len(m.Result.Content) != 1 {
		t.Fatalf("not a tool result: %s", resp)
	}
	return m.Result.Content[0].Text, m.Result.IsError
}

// TestNumbersBeyondFloat64: mcp-go alone answers a protocol error quoting Go
// type names; through PrepareMessage a value keeps its number exactly and an
// argument that must be a number in range is a tool error naming it.
func TestNumbersBeyondFloat64(t *testing.T) {
	st, _ := statetest.NewStore(t)
	s := mcpadapter.NewServer(st, nil)

	bare := wire(t, s, false, "state_set", `{"key":"k","value":{"a":1e400}}`)
	if !strings.Contains(bare, `"error"`) || !strings.Contains(bare, "float64") {
		t.Fatalf("mcp-go alone was expected to fail on 1e400 with a protocol error; it answered %s", bare)
	}

	for _, v := range []string{`{"a":1e400}`, `[1E+999,-1e309]`, `1` + strings.Repeat("0", 400), `{"small":1e-400,"x":"1e400"}`} {
		if text, isErr := toolText(t, wire(t, s, true, "state_set", `{"key":"big","value":`+v+`}`)); isErr {
			t.Fatalf("state_set value %s: %s", v, text)
		}
		text, isErr := toolText(t, wire(t, s, true, "state_get", `{"key":"big"}`))
		if isErr || !strings.Contains(text, `"value":`+v+`,`) {
			t.Errorf("state_get after storing %s = %s: the value must come back exactly", v, text)
		}
	}
	run, _ := toolText(t, wire(t, s, true, "workflow_create", `{"name":"n"}`))
	var created struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(run), &created)
	for _, tc := range []struct{ tool, args, msg string }{
		{"state_set", `{"key":"k","value":1,"ttl_seconds":1e309}`, "ttl_seconds is too large, got 1e309"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":-1e309}`, "ttl_seconds must be greater than 0, got -1e309"},
		{"state_set", `{"key":"k","value":1,"ttl_seconds":1e-400}`, "ttl_seconds must be greater than 0, got 1e-400"},
		{"state_set", `{"key":"k","value":1,"if_version":1e400}`, "if_version is out of range, got 1e400"},
		{"state_set", `{"key":"k","value":1,"if_version":1e999999}`, "if_version is out of range, got 1e999999"}, // once 178 ms (issue 20)
		{"state_set", `{"key":"k","value":1,"if_version":1e-999999}`, "if_version must be an integer, got 1e-999999"},
		{"lease_acquire", `{"resource_id":"r","holder_id":"h","ttl_seconds":2e308}`, "ttl_seconds is too large, got 2e308"},
		{"workflow_checkpoint", `{"run_id":"` + created.RunID + `","step":1e400,"output":{"x":1e400}}`, "step is out of range, got 1e400"},
		{"workflow_claim", `{"run_id":"` + created.RunID + `","agent_id":"a","claim_ttl_seconds":1e999}`, "claim_ttl_seconds is too large, got 1e999"},
		{"history_log", `{"n":1e400}`, "n is out of range, got 1e400"},
	} {
		text, isErr := toolText(t, wire(t, s, true, tc.tool, tc.args))
		if want := "Error calling tool '" + tc.tool + "': " + tc.msg; !isErr || text != want {
			t.Errorf("%s(%s)\n got %s\nwant %s", tc.tool, tc.args, text, want)
		}
	}
	if text, isErr := toolText(t, wire(t, s, true, "workflow_checkpoint", `{"run_id":"`+created.RunID+`","step":1,"output":{"x":1e400}}`)); isErr {
		t.Errorf("a step output with 1e400: %s", text)
	}
}

// PrepareMessage leaves every other message alone, the very same bytes.
func TestPrepareMessageLeavesOthersAlone(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":{"n":1,"note":"x"}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1e300}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":1e400}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"1e400"}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"key":1e400`,
		`not json 1e400`,
	} {
		in := []byte(msg)
		if out := mcpadapter.PrepareMessage(in); &out[0] != &in[0] || !bytes.Equal(out, in) {
			t.Errorf("PrepareMessage changed %s into %s", msg, out)
		}
	}
}

// A client cannot send arguments that pass for wrapped ones: the wrapper's
// key is secret to the process.
func TestWrappedArgumentsCannotBeForged(t *testing.T) {
	st, _ := statetest.NewStore(t)
	s := mcpadapter.NewServer(st, nil)
	text, isErr := toolText(t, wire(t, s, true, "state_get", `{"\u0000mcpadapter.raw.0123456789abcdef01234567":"eyJrZXkiOiJrIn0="}`))
	if !isErr || !strings.Contains(text, "unexpected argument") {
		t.Errorf("a forged wrapper: %s", text)
	}
}
