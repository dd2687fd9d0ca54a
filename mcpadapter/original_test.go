package mcpadapter

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestOriginalMessage(t *testing.T) {
	call := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1e400}}}`)
	prepared := PrepareMessage(call)
	if bytes.Equal(prepared, call) {
		t.Fatal("PrepareMessage left a number beyond float64 as it was")
	}
	orig := OriginalMessage(prepared)
	var m struct {
		Params struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(orig, &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Params.Arguments) != `{"key":"k","value":1e400}` {
		t.Fatalf("OriginalMessage gave arguments %s, want the client's bytes", m.Params.Arguments)
	}
	// Preparing the original again gives a message the tools read the same.
	if again := PrepareMessage(orig); !bytes.Contains(again, []byte("mcpadapter.raw")) {
		t.Fatalf("the original is not prepared again: %s", again)
	}
	for _, msg := range [][]byte{call, []byte(`{"method":"tools/list"}`), []byte(`garbage`)} {
		if got := OriginalMessage(msg); !bytes.Equal(got, msg) {
			t.Fatalf("OriginalMessage changed %s into %s", msg, got)
		}
	}
}
