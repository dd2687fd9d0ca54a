package layout

import (
	"encoding/json"
	"unicode/utf8"
)

// DecodeRun decodes a stored run. Runs are read far more often than
// written (every discovery page reads a run per index entry), so the JSON
// that encoding/json writes for a RunValue is parsed directly, in field
// order; anything else (escapes in a string, another order, a field added
// later) goes to encoding/json, which gives the same result.
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
