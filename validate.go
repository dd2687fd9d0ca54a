package state

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxTTL keeps now+ttl far from overflowing any backend's time arithmetic.
const maxTTL = 100 * 365 * 24 * time.Hour

// maxStep keeps steps exact in every JSON client (2^53).
const maxStep = 1 << 53

// checkKey validates a key-like identifier (key, run id, resource id,
// session id): non-empty, valid UTF-8 without NUL, at most max bytes.
func checkKey(field, v string, max int) error {
	switch {
	case v == "":
		return invalid(field, "must not be empty")
	case len(v) > max:
		return invalid(field, "is %d bytes long, the limit is %d", len(v), max)
	case !utf8.ValidString(v):
		return invalid(field, "must be valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return invalid(field, "must not contain NUL bytes")
	}
	return nil
}

// checkOptionalID validates an optional identifier such as an agent id.
func checkOptionalID(field, v string, max int) error {
	if v == "" {
		return nil
	}
	return checkKey(field, v, max)
}

// checkTTL validates a TTL given with WithTTL or a tool's ttl_seconds.
func checkTTL(field string, ttl time.Duration) error {
	switch {
	case ttl < time.Millisecond:
		return invalid(field, "must be positive and at least 0.001 seconds, got %s seconds", seconds(ttl))
	case ttl > maxTTL:
		return invalid(field, "must be at most 100 years, got %s seconds", seconds(ttl))
	}
	return nil
}

// roundTTL rounds a TTL that is not a whole number of milliseconds up to the
// next one, once, here: every backend stores expiry in milliseconds, so the
// expiry a call reports is the expiry stored. TTLs below a millisecond (which
// checkTTL rejects) and beyond maxTTL are left as they are.
func roundTTL(ttl time.Duration) time.Duration {
	if ttl < time.Millisecond || ttl > maxTTL || ttl%time.Millisecond == 0 {
		return ttl
	}
	return ttl.Truncate(time.Millisecond) + time.Millisecond
}

// seconds formats d as a plain decimal number of seconds.
func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// encodeJSON encodes v as compact JSON without HTML escaping. A
// json.RawMessage is validated and compacted, keeping every digit of its
// numbers. A panicking MarshalJSON method is reported as an error.
func encodeJSON(field string, v any, max int) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, invalid(field, "cannot be encoded as JSON: marshalling panicked: %v", r)
		}
	}()
	switch raw := v.(type) {
	case json.RawMessage:
		if !json.Valid(raw) {
			return nil, invalid(field, "is not valid JSON")
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, invalid(field, "is not valid JSON: %v", err)
		}
		out = buf.Bytes()
	default:
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, invalid(field, "cannot be encoded as JSON: %v", err)
		}
		out = bytes.TrimRight(buf.Bytes(), "\n")
	}
	if len(out) > max {
		return nil, invalid(field, "is %d bytes as JSON, the limit is %d", len(out), max)
	}
	return out, nil
}

// pageLimit validates a page size, applying the default.
func pageLimit(n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > max:
		return 0, invalid("limit", "must be between 1 and %d, got %d", max, n)
	}
	return n, nil
}

// encodeCursor makes an opaque cursor from a position.
func encodeCursor(pos string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pos))
}

// decodeCursor reads a cursor back; "" is the start.
func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) == 0 {
		return "", invalid("cursor", "is not a cursor this store returned")
	}
	return string(b), nil
}

// checkNamespace validates a namespace name: it becomes part of backend keys
// (a Redis hash tag among them), so it is kept to a safe alphabet.
func checkNamespace(ns string) error {
	if ns == "" || len(ns) > 64 {
		return invalid("namespace", "must be 1 to 64 characters, got %d", len(ns))
	}
	if ns == KeysNamespace {
		return invalid("namespace", "%q is reserved for the keys of encryption at rest", ns)
	}
	for _, r := range ns {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return invalid("namespace", "may contain only letters, digits, '-', '_' and '.', got %q", ns)
		}
	}
	return nil
}

// itoa formats an index for field names such as "items[3]".
func itoa(i int) string { return strconv.Itoa(i) }
