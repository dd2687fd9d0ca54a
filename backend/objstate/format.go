package objstate

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/statesidecar/state/backend"
)

// Everything the driver stores is JSON, written by hand (so that a value
// that is JSON, as package state's values are, appears as itself, and a
// commit is one line) and read with encoding/json. Times are RFC 3339 in
// UTC with milliseconds. A value is stored as "json" when it is valid JSON
// in valid UTF-8 without surrounding space (read back byte for byte), as
// "value" when it is other UTF-8 text, and as "value64" (base64) otherwise.

// formatVersion is written in every head, segment and snapshot part; a
// reader refuses another.
const formatVersion = 1

// entry is one element of a commit: a Txn that passed its conditions, or
// a maintenance step (reset, sweep, trim) that writes no revision.
type entry struct {
	now       int64 // Unix ms the entry was evaluated at
	ops       []op
	events    []evIn
	reset     bool
	drop      []string // keys removed by a sweep
	trimBelow int64    // events with lower ids are removed
	revFloor  int64    // the namespace's last revision becomes at least this
}

// op is one write of an entry, its expiry resolved to a time.
type op struct {
	kind   backend.OpKind
	key    string
	value  string
	writer string
	exp    int64 // Unix ms; 0: never
	time   int64 // Unix ms; zeroMs: none
}

// evIn is one event of an entry as committed; apply gives it its id and
// resolves prevOf.
type evIn struct {
	key, op, writer string
	value, prev     string
	prevOf          string
	time            int64 // Unix ms
}

// commit is one object-store commit: a group of entries, at position pos
// of the namespace's log, with the id its writer gave it (to recognise it
// after a write whose outcome it did not learn).
type commit struct {
	pos     int64
	id      string
	entries []entry
}

var opNames = map[backend.OpKind]string{backend.OpPut: "put", backend.OpDelete: "del", backend.OpAdd: "add"}

// --- writing ---

func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, '\\', 'n')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func appendField(b []byte, name string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

func appendStringField(b []byte, name, v string) []byte {
	return appendString(appendField(b, name), v)
}

func appendIntField(b []byte, name string, v int64) []byte {
	return strconv.AppendInt(appendField(b, name), v, 10)
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func appendTimeField(b []byte, name string, ms int64) []byte {
	b = append(appendField(b, name), '"')
	b = fromMs(ms).AppendFormat(b, timeLayout)
	return append(b, '"')
}

// appendValue writes v under name ("json" or "value" or "value64", with
// the given prefix) unless it is empty.
func appendValue(b []byte, prefix, v string) []byte {
	switch {
	case v == "":
		return b
	case isEmbeddable(v):
		return append(appendField(b, prefix+"json"), v...)
	case utf8.ValidString(v):
		return appendStringField(b, prefix+"value", v)
	}
	return appendStringField(b, prefix+"value64", base64.StdEncoding.EncodeToString([]byte(v)))
}

// isEmbeddable reports whether v can stand in a JSON document as itself
// and be read back byte for byte.
func isEmbeddable(v string) bool {
	if !utf8.ValidString(v) || isSpace(v[0]) || isSpace(v[len(v)-1]) {
		return false
	}
	return json.Valid([]byte(v))
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func appendEntry(b []byte, e *entry) []byte {
	b = append(b, '{')
	b = appendTimeField(b, "now", e.now)
	if e.reset {
		b = append(appendField(b, "reset"), "true"...)
	}
	if len(e.drop) > 0 {
		b = append(appendField(b, "drop"), '[')
		for i, k := range e.drop {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
		}
		b = append(b, ']')
	}
	if e.trimBelow > 0 {
		b = appendIntField(b, "trim_below", e.trimBelow)
	}
	if e.revFloor > 0 {
		b = appendIntField(b, "revision_floor", e.revFloor)
	}
	if len(e.ops) > 0 {
		b = append(appendField(b, "ops"), '[')
		for i := range e.ops {
			if i > 0 {
				b = append(b, ',')
			}
			o := &e.ops[i]
			b = append(b, '{')
			b = appendStringField(b, "op", opNames[o.kind])
			b = appendStringField(b, "key", o.key)
			b = appendValue(b, "", o.value)
			if o.writer != "" {
				b = appendStringField(b, "writer", o.writer)
			}
			if o.exp != 0 {
				b = appendTimeField(b, "expires", o.exp)
			}
			if o.time != zeroMs {
				b = appendTimeField(b, "time", o.time)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(e.events) > 0 {
		b = append(appendField(b, "events"), '[')
		for i := range e.events {
			if i > 0 {
				b = append(b, ',')
			}
			ev := &e.events[i]
			b = append(b, '{')
			b = appendStringField(b, "key", ev.key)
			b = appendStringField(b, "op", ev.op)
			b = appendValue(b, "", ev.value)
			b = appendValue(b, "prev_", ev.prev)
			if ev.prevOf != "" {
				b = appendStringField(b, "prev_of", ev.prevOf)
			}
			if ev.writer != "" {
				b = appendStringField(b, "writer", ev.writer)
			}
			b = appendTimeField(b, "time", ev.time)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// encodeCommit writes c as one line of JSON (without the newline).
func encodeCommit(c *commit) []byte {
	b := make([]byte, 0, 256)
	b = append(b, '{')
	b = appendIntField(b, "pos", c.pos)
	b = appendStringField(b, "id", c.id)
	b = append(appendField(b, "entries"), '[')
	for i := range c.entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEntry(b, &c.entries[i])
	}
	return append(b, ']', '}')
}

// --- reading ---

// valueJSON holds a value as written by appendValue.
type valueJSON struct {
	JSON    json.RawMessage `json:"json"`
	Value   *string         `json:"value"`
	Value64 []byte          `json:"value64"`
}

func (v *valueJSON) get() string {
	switch {
	case v.JSON != nil:
		return string(v.JSON)
	case v.Value != nil:
		return *v.Value
	}
	return string(v.Value64)
}

type prevJSON struct {
	JSON    json.RawMessage `json:"prev_json"`
	Value   *string         `json:"prev_value"`
	Value64 []byte          `json:"prev_value64"`
}

func (v *prevJSON) get() string { return (&valueJSON{v.JSON, v.Value, v.Value64}).get() }

// msTime is a time read from its RFC 3339 text.
type msTime int64

func (t *msTime) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("time %s: %w", b, err)
	}
	tt, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	*t = msTime(tt.UnixMilli())
	return nil
}

type opJSON struct {
	Op  string `json:"op"`
	Key string `json:"key"`
	valueJSON
	Writer  string  `json:"writer"`
	Expires msTime  `json:"expires"`
	Time    *msTime `json:"time"`
}

type eventJSON struct {
	Key string `json:"key"`
	Op  string `json:"op"`
	valueJSON
	prevJSON
	PrevOf string `json:"prev_of"`
	Writer string `json:"writer"`
	Time   msTime `json:"time"`
}

type entryJSON struct {
	Now       msTime      `json:"now"`
	Reset     bool        `json:"reset"`
	Drop      []string    `json:"drop"`
	TrimBelow int64       `json:"trim_below"`
	RevFloor  int64       `json:"revision_floor"`
	Ops       []opJSON    `json:"ops"`
	Events    []eventJSON `json:"events"`
}

type commitJSON struct {
	Pos     int64       `json:"pos"`
	ID      string      `json:"id"`
	Entries []entryJSON `json:"entries"`
}

var opKinds = map[string]backend.OpKind{"put": backend.OpPut, "del": backend.OpDelete, "add": backend.OpAdd}

// errFormat wraps every error about what the medium holds.
var errFormat = errors.New("objstate: unreadable object")

func decodeCommit(raw []byte) (commit, error) {
	var cj commitJSON
	if err := json.Unmarshal(raw, &cj); err != nil {
		return commit{}, fmt.Errorf("%w: commit: %v", errFormat, err)
	}
	c := commit{pos: cj.Pos, id: cj.ID, entries: make([]entry, len(cj.Entries))}
	for i := range cj.Entries {
		ej, e := &cj.Entries[i], &c.entries[i]
		e.now, e.reset, e.drop, e.trimBelow, e.revFloor = int64(ej.Now), ej.Reset, ej.Drop, ej.TrimBelow, ej.RevFloor
		e.ops = make([]op, len(ej.Ops))
		for k := range ej.Ops {
			oj := &ej.Ops[k]
			kind, ok := opKinds[oj.Op]
			if !ok {
				return commit{}, fmt.Errorf("%w: commit %d: op %q", errFormat, cj.Pos, oj.Op)
			}
			e.ops[k] = op{kind: kind, key: oj.Key, value: oj.valueJSON.get(), writer: oj.Writer, exp: int64(oj.Expires), time: zeroMs}
			if oj.Time != nil {
				e.ops[k].time = int64(*oj.Time)
			}
		}
		e.events = make([]evIn, len(ej.Events))
		for k := range ej.Events {
			vj := &ej.Events[k]
			e.events[k] = evIn{key: vj.Key, op: vj.Op, writer: vj.Writer, value: vj.valueJSON.get(),
				prev: vj.prevJSON.get(), prevOf: vj.PrevOf, time: int64(vj.Time)}
		}
	}
	return c, nil
}

// toEntry turns a Txn whose now is resolved into an entry.
func toEntry(txn *backend.Txn, nowMs int64) entry {
	e := entry{now: nowMs, ops: make([]op, len(txn.Then)), events: make([]evIn, len(txn.Events))}
	for i := range txn.Then {
		o := &txn.Then[i]
		e.ops[i] = op{kind: o.Kind, key: o.Key, value: string(o.Value), writer: o.Writer, time: toMs(o.Time)}
		if o.TTL > 0 && o.Kind != backend.OpDelete {
			e.ops[i].exp = time.UnixMilli(nowMs).Add(o.TTL).UnixMilli()
		}
		if o.Kind == backend.OpDelete {
			e.ops[i].value, e.ops[i].writer, e.ops[i].time = "", "", zeroMs
		}
	}
	for i := range txn.Events {
		v := &txn.Events[i]
		e.events[i] = evIn{key: v.Key, op: v.Op, writer: v.Writer, value: string(v.Value), prev: string(v.Prev),
			prevOf: v.PrevOf, time: nowMs}
		if !v.Time.IsZero() {
			e.events[i].time = v.Time.UnixMilli()
		}
	}
	return e
}
