package mcptasks

import "testing"

// TestMayBeOursMissesNothingADecodeWouldFind: the messages a decode would
// find a task request in (in any spelling encoding/json accepts) pass the
// filter; plain tool calls do not.
func TestMayBeOursMissesNothingADecodeWouldFind(t *testing.T) {
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","task":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","TASK":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Task" :{"ttl":5}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","\u0074ask":{}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"ta\u017fk\":{}}}",
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tasks\/list"}`,
	} {
		if !mayBeOurs([]byte(msg)) {
			t.Errorf("the filter drops %s", msg)
		}
	}
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":{"n":1}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"tasky":1}}}`,
	} {
		if mayBeOurs([]byte(msg)) {
			t.Errorf("the filter keeps the plain %s", msg)
		}
	}
}
