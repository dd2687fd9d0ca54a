package mcpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
)

// kind is the type of a tool parameter: it decides how the argument is
// checked and decoded, and what the input schema says about it.
type kind int

const (
	kString   kind = iota // a JSON string
	kJSON                 // any JSON value, null included, kept byte for byte
	kSeconds              // a JSON number > 0, in seconds with ms precision
	kInt                  // a JSON number that is an integer >= param.min
	kBool                 // true or false
	kTags                 // a JSON object whose values are strings
	kObject               // a JSON object, kept byte for byte
	kEnum                 // a JSON string, one of param.enum
	kEnumList             // a JSON array of distinct strings, each one of param.enum
)

// A param describes one parameter of a tool.
type param struct {
	name     string
	kind     kind
	required bool
	desc     string
	min      int64         // kInt: the smallest value accepted
	max      time.Duration // kSeconds: the largest value accepted; 0: none
	def      any           // default shown in the schema, if any
	enum     []string      // kEnum: the values accepted
}

// args holds a tool call's decoded arguments by parameter name; an absent
// optional argument (or an explicit null for one) has no entry.
type args map[string]any

func (a args) has(name string) bool { return a[name] != nil }

func (a args) str(name string) string {
	s, _ := a[name].(string)
	return s
}

func (a args) int(name string) int64 {
	n, _ := a[name].(int64)
	return n
}

func (a args) bool(name string) bool {
	b, _ := a[name].(bool)
	return b
}

func (a args) dur(name string) time.Duration {
	d, _ := a[name].(time.Duration)
	return d
}

func (a args) raw(name string) json.RawMessage {
	r, _ := a[name].(json.RawMessage)
	return r
}

func (a args) tags(name string) map[string]string {
	m, _ := a[name].(map[string]string)
	return m
}

// argError is a bad argument; its text is the message of the tool error.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func badArg(format string, a ...any) error { return &argError{msg: fmt.Sprintf(format, a...)} }

// parseArgs checks raw, the arguments of a call to t, against t's parameters
// and decodes them. Numbers are read from the JSON text itself, so integers
// beyond 2^53 keep every digit.
func parseArgs(t *tool, raw json.RawMessage) (args, error) {
	fields := map[string]json.RawMessage{}
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if raw[0] != '{' {
			return nil, badArg("arguments must be a JSON object, got %s", jsonKind(raw))
		}
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, badArg("arguments are not valid JSON: %v", err)
		}
	}
	for name := range fields {
		if !t.hasParam(name) {
			// Name the first unexpected one in sorted order, whatever the
			// map's order.
			for _, name := range slices.Sorted(maps.Keys(fields)) {
				if !t.hasParam(name) {
					return nil, badArg("unexpected argument '%s' (%s)", name, t.takes())
				}
			}
		}
	}
	a := make(args, len(fields))
	for _, p := range t.params {
		v, ok := fields[p.name]
		isNull := ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
		switch {
		case p.kind == kJSON && ok:
			a[p.name] = append(json.RawMessage(nil), bytes.TrimSpace(v)...)
			continue
		case !ok || isNull:
			if p.required {
				return nil, badArg("%s is required", p.name)
			}
			continue
		}
		x, err := p.decode(bytes.TrimSpace(v))
		if err != nil {
			return nil, err
		}
		if x != nil {
			a[p.name] = x
		}
	}
	return a, nil
}

// decode checks and decodes one non-null argument of p.
func (p *param) decode(v json.RawMessage) (any, error) {
	switch p.kind {
	case kString, kEnum:
		if err := checkText(p.name, v); err != nil {
			return nil, err
		}
		var s string
		if v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return nil, badArg("%s must be a string, got %s", p.name, jsonKind(v))
		}
		if p.kind == kEnum && s == "" && !p.required {
			return nil, nil // the Python sidecar reads "" as "no filter"
		}
		if p.kind == kEnum && !slices.Contains(p.enum, s) {
			return nil, badArg("%s must be one of %s, got %q", p.name, strings.Join(p.enum, ", "), s)
		}
		return s, nil
	case kBool:
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return nil, badArg("%s must be true or false, got %s", p.name, jsonKind(v))
		}
		return b, nil
	case kInt:
		return p.decodeInt(v)
	case kSeconds:
		return p.decodeSeconds(v)
	case kEnumList:
		return p.decodeEnumList(v)
	case kTags:
		if v[0] != '{' {
			return nil, badArg("%s must be an object of strings, got %s", p.name, jsonKind(v))
		}
		if err := checkText(p.name, v); err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return nil, badArg("%s is not valid JSON: %v", p.name, err)
		}
		tags := make(map[string]string, len(m))
		for k, tv := range m {
			var s string
			if len(tv) == 0 || tv[0] != '"' || json.Unmarshal(tv, &s) != nil {
				return nil, badArg("%s must be an object of strings: the value of %q is %s", p.name, k, jsonKind(tv))
			}
			tags[k] = s
		}
		return tags, nil
	case kObject:
		if v[0] != '{' {
			return nil, badArg("%s must be a JSON object, got %s", p.name, jsonKind(v))
		}
		return append(json.RawMessage(nil), v...), nil
	}
	return append(json.RawMessage(nil), v...), nil
}

// decodeInt reads an integer exactly: 7, 7.0 and 7e0 are 7; 7.5 is an error.
func (p *param) decodeInt(v json.RawMessage) (any, error) {
	if !isNumber(v) {
		return nil, badArg("%s must be an integer, got %s", p.name, jsonKind(v))
	}
	n, how := exactInt(v) // numbers.go: linear work, whatever the exponent
	switch how {
	case intNotInteger, intMalformed:
		return nil, badArg("%s must be an integer, got %s", p.name, v)
	case intOutOfRange:
		return nil, badArg("%s is out of range, got %s", p.name, v)
	}
	if n < p.min {
		return nil, badArg("%s must be >= %d, got %s", p.name, p.min, v)
	}
	return n, nil
}

// maxSeconds keeps a number of seconds within time.Duration; the store
// enforces its own, lower, limit.
const maxSeconds = float64(math.MaxInt64 / int64(time.Second))

// decodeSeconds reads a positive number of seconds, rounded to milliseconds.
func (p *param) decodeSeconds(v json.RawMessage) (any, error) {
	if !isNumber(v) {
		return nil, badArg("%s must be a number of seconds, got %s", p.name, jsonKind(v))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return nil, badArg("%s must be a number of seconds, got %s", p.name, v)
	case f < 0 || f == 0 && err == nil:
		return nil, badArg("%s must be greater than 0, got %s", p.name, v)
	case f > maxSeconds || math.IsInf(f, 0):
		return nil, badArg("%s is too large, got %s", p.name, v)
	}
	d := time.Duration(math.Round(f*1000)) * time.Millisecond
	if d < time.Millisecond {
		return nil, badArg("%s must be at least 0.001 (one millisecond), got %s", p.name, v)
	}
	if p.max > 0 && d > p.max {
		return nil, badArg("%s must be at most %g, got %s", p.name, p.max.Seconds(), v)
	}
	return d, nil
}

// decodeEnumList reads an array of distinct strings, each one of p.enum.
func (p *param) decodeEnumList(v json.RawMessage) (any, error) {
	if err := checkText(p.name, v); err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if v[0] != '[' || json.Unmarshal(v, &list) != nil {
		return nil, badArg("%s must be an array of strings, got %s", p.name, jsonKind(v))
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		var s string
		if len(e) == 0 || e[0] != '"' || json.Unmarshal(e, &s) != nil {
			return nil, badArg("%s must be an array of strings: item %d is %s", p.name, i, jsonKind(e))
		}
		if !slices.Contains(p.enum, s) {
			return nil, badArg("%s: item %d must be one of %s, got %q", p.name, i, strings.Join(p.enum, ", "), s)
		}
		if slices.Contains(out, s) {
			return nil, badArg("%s: item %d repeats %q", p.name, i, s)
		}
		out = append(out, s)
	}
	return out, nil
}

func (a args) strs(name string) []string {
	s, _ := a[name].([]string)
	return s
}

// checkText rejects, in the JSON text of a string (or of an object of
// strings), bytes that are not UTF-8 and \u escapes of lone UTF-16
// surrogates. encoding/json would turn both into U+FFFD, so that distinct
// keys ("x\ud800" and "x\udbff") would silently become one.
func checkText(name string, v []byte) error {
	if !utf8.Valid(v) {
		return badArg("%s must be valid UTF-8 text: it contains bytes that are not UTF-8", name)
	}
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' {
			continue
		}
		r, ok := escapeAt(v, i)
		if !ok {
			i++ // some other escape: skip the escaped character
			continue
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xDC00: // a high surrogate needs a low one next
			if lo, ok := escapeAt(v, i+6); ok && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			fallthrough
		case utf16.IsSurrogate(r):
			return badArg("%s must be valid Unicode text: it contains a lone UTF-16 surrogate (\\u%04x)", name, r)
		}
		i += 5
	}
	return nil
}

// escapeAt returns the code unit of the \u escape (four hex digits) at v[i:], if there is
// one.
func escapeAt(v []byte, i int) (rune, bool) {
	if i+6 > len(v) || v[i] != '\\' || v[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range v[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isNumber(v json.RawMessage) bool {
	return len(v) > 0 && (v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// jsonKind names the JSON type of v for error messages.
func jsonKind(v json.RawMessage) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
