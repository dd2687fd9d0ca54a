package mcpadapter

import (
	"bytes"
	"encoding/json"
)

// OriginalMessage undoes PrepareMessage: when msg is a tools/call whose
// arguments PrepareMessage wrapped, it returns the message with the
// arguments as the client sent them, byte for byte; any other message is
// returned as it is. A host that keeps a call to run it later, perhaps in
// another process (a durable task), keeps the original: the wrapping is
// only understood by the process that made it.
func OriginalMessage(msg []byte) []byte {
	marker, _ := json.Marshal(wrapKey)
	if !bytes.Contains(msg, marker[:len(marker)-1]) {
		return msg
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil {
		return msg
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(top["params"], &params) != nil {
		return msg
	}
	var args map[string]any
	if json.Unmarshal(params["arguments"], &args) != nil {
		return msg
	}
	raw, ok := unwrapArguments(args)
	if !ok {
		return msg
	}
	params["arguments"] = raw
	var err error
	if top["params"], err = marshalRaw(params); err != nil {
		return msg
	}
	out, err := marshalRaw(top)
	if err != nil {
		return msg
	}
	return out
}
