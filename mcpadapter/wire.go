package mcpadapter

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"
)

// PrepareMessage readies one JSON-RPC message, as a transport received it,
// for an mcp-go server. mcp-go decodes a tool call's arguments into Go
// values before any tool runs, and that fails, as a protocol error quoting
// Go type names, on a number beyond float64's range (1e400). When msg is
// such a tools/call, PrepareMessage returns a copy whose arguments are
// wrapped so that mcp-go passes them through untouched; the tools unwrap
// them and see the exact bytes the client sent, so that a value keeps its
// 1e400 and an out-of-range ttl_seconds gets a tool error naming it. Any
// other message is returned as it is, without copying, after a scan of its
// bytes.
//
// The sidecar calls it on every message it receives over HTTP and stdio. A
// host serving the tools over its own transport may do the same; without it
// such calls fail as mcp-go makes them fail, and nothing else changes.
func PrepareMessage(msg []byte) []byte {
	if !mayOverflow(msg) {
		return msg
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil {
		return msg
	}
	var method string
	if json.Unmarshal(top["method"], &method) != nil || method != "tools/call" {
		return msg
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(top["params"], &params) != nil {
		return msg
	}
	args, ok := params["arguments"]
	if !ok {
		return msg
	}
	var v any
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(args, &v); err == nil || !errors.As(err, &te) {
		return msg // mcp-go decodes it, or it is not JSON and mcp-go says so
	}
	wrapped, err := json.Marshal(map[string]string{wrapKey: base64.StdEncoding.EncodeToString(args)})
	if err != nil {
		return msg
	}
	params["arguments"] = wrapped
	if top["params"], err = marshalRaw(params); err != nil {
		return msg
	}
	out, err := marshalRaw(top)
	if err != nil {
		return msg
	}
	// The rest of the call must decode as mcp-go decodes it (encoding/json
	// matches field names without regard to case, so {"nAme":{}} is a name
	// that is not a string): if it does not, mcp-go reports the original.
	var req mcp.CallToolRequest
	if json.Unmarshal(out, &req) != nil {
		return msg
	}
	return out
}

// mayOverflow reports whether msg may hold a number beyond float64: one
// with an exponent, or with 309 digits or more in a row. It may say yes for
// digits inside strings; the caller then looks closer.
func mayOverflow(msg []byte) bool {
	run := 0
	for i, c := range msg {
		switch {
		case c >= '0' && c <= '9':
			run++
			if run >= 309 {
				return true
			}
		case (c == 'e' || c == 'E') && run > 0 && i+1 < len(msg):
			return true
		default:
			run = 0
		}
	}
	return false
}

// marshalRaw encodes m without escaping HTML characters, so that the raw
// values in it keep their text.
func marshalRaw(m map[string]json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// wrapKey is the one key of wrapped arguments. It is new in every process,
// so a client cannot send arguments that look wrapped.
var wrapKey = func() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "\x00mcpadapter.raw." + hex.EncodeToString(b[:])
}()

// unwrapArguments returns the arguments PrepareMessage wrapped in a, if it
// did.
func unwrapArguments(a any) (json.RawMessage, bool) {
	m, ok := a.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, false
	}
	s, ok := m[wrapKey].(string)
	if !ok {
		return nil, false
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return raw, true
}
