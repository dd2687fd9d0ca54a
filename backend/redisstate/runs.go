package redisstate

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/statesidecar/state/backend"
)

// A run record's value (backend.RunValue's JSON) is stored packed, so that
// lua/claim.lua reads each field a claim needs directly, with one
// struct.unpack, and never parses JSON: the run's head (backend.RunHead)
// as fields, then its tail, the JSON no claim changes, as it is. In the
// script's struct notation:
//
//	'<Bi8i8i8i8i8Bc0Bc0i4c0i4c0' .. tail
//	 1, attempt, fence, updated_at, claim_expires_at, claim_ttl_ms,
//	 #status, status, #last_step, last_step (decimal text: a step may be
//	 beyond the 2^53 Lua's numbers hold exactly), #agent, agent (its JSON,
//	 as encoding/json writes it; "" for none), #parent, parent (its id)
//
// The first byte, 1, tells a packed run from a run stored as JSON, which
// starts with '{'. Runs written by earlier versions are JSON; so is a run
// whose value backend.SplitRun cannot cut, or whose numbers a Lua number
// would not hold exactly. The driver reads both forms back as the same
// JSON (toRecord); the claim script leaves a JSON run to package state's
// portable claim (backend.ErrSkip), whose commit stores it packed.
const packedRun = 1

// maxLuaExact bounds the numbers packRun packs: below it Lua's numbers
// (doubles) hold them exactly and its concatenation (%.14g) writes them
// in full.
const maxLuaExact = 1e14

// packRun returns the packed form of value, the value of a run record, or
// value itself when it cannot be packed.
func packRun(value []byte) []byte {
	h, tail, ok := backend.SplitRun(value)
	if !ok || len(h.Status) > 255 {
		return value
	}
	for _, n := range []int64{h.Attempt, h.Fence, h.UpdatedAt, h.ClaimExpiresAt, h.ClaimTTL} {
		if n < 0 || n >= maxLuaExact {
			return value
		}
	}
	b := make([]byte, 0, 43+len(h.Status)+20+8+len(h.AgentJSON)+len(h.Parent)+len(tail))
	b = append(b, packedRun)
	for _, n := range []int64{h.Attempt, h.Fence, h.UpdatedAt, h.ClaimExpiresAt, h.ClaimTTL} {
		b = binary.LittleEndian.AppendUint64(b, uint64(n))
	}
	b = append(b, byte(len(h.Status)))
	b = append(b, h.Status...)
	ls := strconv.AppendInt(nil, h.LastStep, 10)
	b = append(b, byte(len(ls)))
	b = append(b, ls...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.AgentJSON)))
	b = append(b, h.AgentJSON...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.Parent)))
	b = append(b, h.Parent...)
	return append(b, tail...)
}

var errPackedRun = errors.New("corrupt packed run")

// unpackRun returns the JSON of a run record's stored value s: s itself
// when it is JSON, the run put together again when it is packed.
func unpackRun(s string) ([]byte, error) {
	if s == "" || s[0] != packedRun {
		return []byte(s), nil
	}
	if len(s) < 42 {
		return nil, errPackedRun
	}
	var h backend.RunHead
	p := s[1:]
	h.Attempt, h.Fence, h.UpdatedAt, h.ClaimExpiresAt, h.ClaimTTL = le64(p), le64(p[8:]), le64(p[16:]), le64(p[24:]), le64(p[32:])
	p = p[40:]
	var ok bool
	if h.Status, p, ok = cut(p, int64(p[0]), 1); !ok {
		return nil, errPackedRun
	}
	var ls string
	if len(p) < 1 {
		return nil, errPackedRun
	}
	if ls, p, ok = cut(p, int64(p[0]), 1); !ok {
		return nil, errPackedRun
	}
	n, err := strconv.ParseInt(ls, 10, 64)
	if err != nil {
		return nil, errPackedRun
	}
	h.LastStep = n
	if len(p) < 4 {
		return nil, errPackedRun
	}
	if h.AgentJSON, p, ok = cut(p, le32(p), 4); !ok || len(p) < 4 {
		return nil, errPackedRun
	}
	if _, p, ok = cut(p, le32(p), 4); !ok || !strings.HasPrefix(p, ",") { // the parent: the tail holds it too
		return nil, errPackedRun
	}
	return backend.AppendRun(make([]byte, 0, len(s)+96), &h, []byte(p)), nil
}

// cut returns the n bytes of p after a length of size bytes, and the rest.
func cut(p string, n int64, size int) (field, rest string, ok bool) {
	if n < 0 || int64(len(p)-size) < n {
		return "", "", false
	}
	return p[size : size+int(n)], p[size+int(n):], true
}
