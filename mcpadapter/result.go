package mcpadapter

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// stamp is a time written as epoch seconds with millisecond precision, the
// way Python writes a float: 1718000000.123, 1718000000.5, 1718000000.0.
type stamp time.Time

// MarshalJSON writes the epoch seconds.
func (s stamp) MarshalJSON() ([]byte, error) {
	return []byte(decimal(time.Time(s).UnixMilli(), 3)), nil
}

func (stamp) jsonSchema() obj {
	return obj{{"type", "number"}, {"description", "epoch seconds"}}
}

// optStamp is t, or nil (null) for the zero time.
func optStamp(t time.Time) *stamp {
	if t.IsZero() {
		return nil
	}
	s := stamp(t)
	return &s
}

// seconds is a duration written as seconds rounded to two decimals, like
// the Python sidecar's uptime_s.
type seconds time.Duration

// MarshalJSON writes the seconds.
func (d seconds) MarshalJSON() ([]byte, error) {
	return []byte(decimal(time.Duration(d).Round(10*time.Millisecond).Milliseconds()/10, 2)), nil
}

func (seconds) jsonSchema() obj { return obj{{"type", "number"}} }

// decimal writes n / 10^places as a decimal with at least one fractional
// digit and no trailing zeros beyond it.
func decimal(n int64, places int) string {
	neg := n < 0
	if neg {
		n = -n
	}
	s := strconv.FormatInt(n, 10)
	if len(s) <= places {
		s = strings.Repeat("0", places-len(s)+1) + s
	}
	whole, frac := s[:len(s)-places], strings.TrimRight(s[len(s)-places:], "0")
	if frac == "" {
		frac = "0"
	}
	if neg {
		whole = "-" + whole
	}
	return whole + "." + frac
}

// rawObject is a JSON object kept byte for byte, or null when nil; it
// encodes exactly as a json.RawMessage does, and its schema says object or
// null rather than any JSON value.
type rawObject json.RawMessage

// MarshalJSON writes the object, or null.
func (m rawObject) MarshalJSON() ([]byte, error) { return json.RawMessage(m).MarshalJSON() }

func (rawObject) jsonSchema() obj { return nullable(obj{{"type", "object"}}) }

// optStr is s, or nil (null) for "".
func optStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// optInt is n, or nil (null) for 0.
func optInt(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// encode writes a result as compact JSON, fields in declaration order, HTML
// characters unescaped and stored JSON values byte for byte.
func encode(v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	if err := e.enc.Encode(v); err != nil {
		return nil, err // e is dropped: its buffer may hold a part
	}
	b := bytes.Clone(bytes.TrimRight(e.buf.Bytes(), "\n"))
	if e.buf.Cap() <= 64<<10 { // a large result's buffer is not kept
		e.buf.Reset()
		encoders.Put(e)
	}
	return b, nil
}

// An encoder is a JSON encoder with its buffer, reused across calls.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// success is a tool result carrying b both as structured content and, for
// clients that read only text, as text.
func success(b []byte) *mcp.CallToolResult {
	// The result and its one-item content list in one allocation.
	r := &struct {
		res     mcp.CallToolResult
		content [1]mcp.Content
	}{}
	r.content[0] = mcp.NewTextContent(string(b))
	r.res.Content, r.res.StructuredContent = r.content[:], json.RawMessage(b)
	return &r.res
}

// failure is a tool error result in the words FastMCP uses, so that agents
// written for the Python sidecar read the same text.
func failure(toolName, msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content: []mcp.Content{mcp.NewTextContent("Error calling tool '" + toolName + "': " + msg)},
		IsError: true,
	}
}
