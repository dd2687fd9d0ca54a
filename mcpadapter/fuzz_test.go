package mcpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// FuzzParseArgs decodes arbitrary argument JSON for every tool. It must
// never panic; a rejection is an argument error naming a parameter (or the
// arguments as a whole); an accepted string is valid UTF-8 and was not
// silently changed (no U+FFFD that the client did not send).
//
// The seed corpus is testdata/fuzz/FuzzParseArgs; go test runs it, and
// go test -fuzz FuzzParseArgs ./mcpadapter explores further.
func FuzzParseArgs(f *testing.F) {
	f.Add(uint8(0), []byte(`{"key":"k","value":{"a":1}}`))
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		tl := &table[int(which)%len(table)]
		a, err := parseArgs(tl, raw)
		if err != nil {
			var ae *argError
			if !errors.As(err, &ae) {
				t.Fatalf("%s(%q): error %T %v, want an argument error", tl.name, raw, err, err)
			}
			if !namesAParameter(tl, ae.msg) {
				t.Fatalf("%s(%q): error %q names no parameter", tl.name, raw, ae.msg)
			}
			return
		}
		sentFFFD := bytes.Contains(raw, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`))
		for name, v := range a {
			var texts []string
			switch x := v.(type) {
			case string:
				texts = append(texts, x)
			case map[string]string:
				for k, s := range x {
					texts = append(texts, k, s)
				}
			}
			for _, s := range texts {
				if !utf8.ValidString(s) {
					t.Fatalf("%s(%q): %s holds invalid UTF-8 %q", tl.name, raw, name, s)
				}
				if strings.ContainsRune(s, utf8.RuneError) && !sentFFFD {
					t.Fatalf("%s(%q): %s became %q: a character was replaced", tl.name, raw, name, s)
				}
			}
		}
	})
}

// namesAParameter reports whether msg, an argument error of t, starts with
// one of t's parameters or speaks of the arguments as a whole.
func namesAParameter(t *tool, msg string) bool {
	if strings.HasPrefix(msg, "arguments ") || strings.HasPrefix(msg, "unexpected argument ") {
		return true
	}
	for _, p := range t.params {
		if strings.HasPrefix(msg, p.name+" ") {
			return true
		}
	}
	return false
}

// FuzzPrepareMessage: PrepareMessage never panics; a message it changes
// decodes as mcp-go decodes a tool call, and the tool gets back exactly the
// arguments that were sent.
func FuzzPrepareMessage(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"state_set","arguments":{"key":"k","value":1e400}}}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		out := PrepareMessage(msg)
		if bytes.Equal(out, msg) {
			return
		}
		var req mcp.CallToolRequest
		if err := json.Unmarshal(out, &req); err != nil {
			t.Fatalf("PrepareMessage(%q) = %q, which mcp-go cannot decode: %v", msg, out, err)
		}
		got, ok := unwrapArguments(req.Params.Arguments)
		if !ok {
			t.Fatalf("PrepareMessage(%q) = %q changed the message without wrapping the arguments", msg, out)
		}
		var sent struct {
			Params struct {
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(msg, &sent); err != nil || !bytes.Equal(got, sent.Params.Arguments) {
			t.Fatalf("PrepareMessage(%q): the tool would see %q, the client sent %q", msg, got, sent.Params.Arguments)
		}
	})
}
