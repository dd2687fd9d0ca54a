package backend

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// DecodeRun decodes the value of a run record. Runs are read far more
// often than written (every discovery page reads a run per index entry), so
// the JSON that encoding/json writes for a RunValue is parsed directly, in
// field order; anything else (escapes in a string, another order, a field
// added later) goes to encoding/json, which gives the same result.
func DecodeRun(b []byte) (*RunValue, error) {
	v := new(RunValue)
	if (&runParser{b: b}).parse(v) {
		return v, nil
	}
	*v = RunValue{}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, err
	}
	return v, nil
}

// runParser reads the JSON of a RunValue as json.Marshal writes it. Each
// method reports false at the first byte it does not expect.
type runParser struct {
	b []byte
	i int
}

func (p *runParser) parse(v *RunValue) bool {
	ok := p.lit(`{"status":`) && p.str(&v.Status)
	if ok && p.lit(`,"agent_id":`) {
		ok = p.str(&v.AgentID)
	}
	ok = ok && p.lit(`,"last_step":`) && p.num(&v.LastStep) &&
		p.lit(`,"attempt":`) && p.num(&v.Attempt) &&
		p.lit(`,"fence":`) && p.num(&v.Fence) &&
		p.lit(`,"updated_at":`) && p.num(&v.UpdatedAt)
	if ok && p.lit(`,"claim_expires_at":`) {
		ok = p.num(&v.ClaimExpiresAt)
	}
	if ok && p.lit(`,"claim_ttl_ms":`) {
		ok = p.num(&v.ClaimTTL)
	}
	if ok && p.lit(`,"parent_run_id":`) {
		ok = p.str(&v.Parent)
	}
	if ok && p.lit(`,"join":true`) {
		v.Join = true
	}
	ok = ok && p.lit(`,"name":`) && p.str(&v.Name) && p.lit(`,"tags":{`)
	if !ok {
		return false
	}
	v.Tags = map[string]string{}
	for first := true; !p.lit(`}`); first = false {
		var k, val string
		if (!first && !p.lit(`,`)) || !p.str(&k) || !p.lit(`:`) || !p.str(&val) {
			return false
		}
		v.Tags[k] = val
	}
	return p.lit(`,"created_at":`) && p.num(&v.CreatedAt) && p.lit(`}`) && p.i == len(p.b)
}

// lit consumes s if the input continues with it.
func (p *runParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// str reads a JSON string without escapes.
func (p *runParser) str(dst *string) bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			s := p.b[p.i+1 : j]
			if !utf8.Valid(s) {
				return false
			}
			*dst, p.i = string(s), j+1
			return true
		case c == '\\' || c < 0x20:
			return false
		}
	}
	return false
}

// num reads an integer as json.Marshal writes an int64.
func (p *runParser) num(dst *int64) bool {
	j, neg := p.i, false
	if j < len(p.b) && p.b[j] == '-' {
		neg, j = true, j+1
	}
	start := j
	var n int64
	for ; j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9'; j++ {
		if j-start >= 18 { // beyond what cannot overflow: let encoding/json decide
			return false
		}
		n = n*10 + int64(p.b[j]-'0')
	}
	if j == start || (p.b[start] == '0' && j-start > 1) {
		return false
	}
	if neg {
		n = -n
	}
	*dst, p.i = n, j
	return true
}

// RunHead is the part of a run's value that a claim reads and changes: the
// fields its JSON holds first, status to claim_ttl_ms. SplitRun cuts a
// run's value into its head and its tail (the rest, from parent_run_id or
// name to the end), which no claim changes; AppendRun puts them together
// again, byte for byte as encoding/json writes the RunValue. A native
// claim can so keep the head where its script reads each field directly
// (a column, a packed field) and the tail as bytes it never parses.
type RunHead struct {
	Status string
	// AgentJSON is the agent's id as encoding/json writes it, a quoted
	// and escaped string, or "" when the run has no agent.
	AgentJSON      string
	LastStep       int64
	Attempt        int64
	Fence          int64
	UpdatedAt      int64
	ClaimExpiresAt int64
	ClaimTTL       int64
	// Parent is the parent run's id, or "": it is part of the tail, and
	// given here too because a fresh claim of a child counts on its
	// parent (ClaimedChildrenKey).
	Parent string
}

// SplitRun cuts b, the value of a run record, into its head and its tail,
// and reports whether it could: b must be a RunValue as encoding/json
// writes it, with a status that needs no escape. For every b it accepts,
// AppendRun(nil, &head, tail) is b again.
func SplitRun(b []byte) (head RunHead, tail []byte, ok bool) {
	p := &runParser{b: b}
	if !p.lit(`{"status":`) || !p.str(&head.Status) {
		return RunHead{}, nil, false
	}
	if p.lit(`,"agent_id":`) {
		start := p.i
		if !p.skipStr() || p.i-start == 2 { // an empty agent is omitted, never written
			return RunHead{}, nil, false
		}
		head.AgentJSON = string(b[start:p.i])
	}
	ok = p.lit(`,"last_step":`) && p.int(&head.LastStep) &&
		p.lit(`,"attempt":`) && p.int(&head.Attempt) &&
		p.lit(`,"fence":`) && p.int(&head.Fence) &&
		p.lit(`,"updated_at":`) && p.int(&head.UpdatedAt)
	if ok && p.lit(`,"claim_expires_at":`) {
		ok = p.int(&head.ClaimExpiresAt) && head.ClaimExpiresAt != 0
	}
	if ok && p.lit(`,"claim_ttl_ms":`) {
		ok = p.int(&head.ClaimTTL) && head.ClaimTTL != 0
	}
	if !ok {
		return RunHead{}, nil, false
	}
	tail = b[p.i:]
	if !p.tail(&head.Parent) {
		return RunHead{}, nil, false
	}
	return head, tail, true
}

// tail reads the rest of a run's value as encoding/json writes it,
// parent_run_id on, setting parent; the fields' values are checked, not
// decoded.
func (p *runParser) tail(parent *string) bool {
	if p.lit(`,"parent_run_id":`) {
		start := p.i
		if !p.skipStr() || p.i-start == 2 {
			return false
		}
		if err := json.Unmarshal(p.b[start:p.i], parent); err != nil {
			return false
		}
	}
	p.lit(`,"join":true`)
	if !p.lit(`,"name":`) || !p.skipStr() || !p.lit(`,"tags":`) {
		return false
	}
	if !p.lit(`null`) {
		if !p.lit(`{`) {
			return false
		}
		for first := true; !p.lit(`}`); first = false {
			if (!first && !p.lit(`,`)) || !p.skipStr() || !p.lit(`:`) || !p.skipStr() {
				return false
			}
		}
	}
	var created int64
	return p.lit(`,"created_at":`) && p.int(&created) && p.lit(`}`) && p.i == len(p.b)
}

// AppendRun appends to dst the value of a run record whose head is h and
// whose tail is tail, as SplitRun cut them.
func AppendRun(dst []byte, h *RunHead, tail []byte) []byte {
	dst = append(dst, `{"status":"`...)
	dst = append(dst, h.Status...)
	dst = append(dst, '"')
	if h.AgentJSON != "" {
		dst = append(dst, `,"agent_id":`...)
		dst = append(dst, h.AgentJSON...)
	}
	dst = append(dst, `,"last_step":`...)
	dst = strconv.AppendInt(dst, h.LastStep, 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, h.Attempt, 10)
	dst = append(dst, `,"fence":`...)
	dst = strconv.AppendInt(dst, h.Fence, 10)
	dst = append(dst, `,"updated_at":`...)
	dst = strconv.AppendInt(dst, h.UpdatedAt, 10)
	if h.ClaimExpiresAt != 0 {
		dst = append(dst, `,"claim_expires_at":`...)
		dst = strconv.AppendInt(dst, h.ClaimExpiresAt, 10)
	}
	if h.ClaimTTL != 0 {
		dst = append(dst, `,"claim_ttl_ms":`...)
		dst = strconv.AppendInt(dst, h.ClaimTTL, 10)
	}
	return append(dst, tail...)
}

// int reads an integer as num does, refusing "-0", which encoding/json
// never writes: SplitRun's head must be written back byte for byte.
func (p *runParser) int(dst *int64) bool {
	start := p.i
	return p.num(dst) && (*dst != 0 || p.b[start] != '-')
}

// skipStr moves past a JSON string as encoding/json writes one: valid
// UTF-8, no control character, only the escapes JSON allows.
func (p *runParser) skipStr() bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	for j := p.i + 1; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			if !utf8.Valid(p.b[p.i+1 : j]) {
				return false
			}
			p.i = j + 1
			return true
		case c == '\\':
			if j+1 >= len(p.b) {
				return false
			}
			j++
			switch p.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(p.b) {
					return false
				}
				for _, h := range p.b[j+1 : j+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		case c < 0x20:
			return false
		}
	}
	return false
}
