package memstate

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
)

// eventLog is one namespace's history: every event packed into one string
// (no pointers for the garbage collector to follow, one allocation each),
// in append order. Each packed event carries the id of the previous event
// of its key, and latest gives each key's newest event, so that reading one
// key's history follows its own events instead of scanning the log.
type eventLog struct {
	first  int64    // id of events[0]
	events []string // packed, ascending id
	// latest maps a key to the id of its newest event. The map's key
	// shares the bytes of that event, so it costs no copy.
	latest map[string]int64
}

// evHeader is the packed event's header: revision, time in ms and the id
// of the key's previous event (0: none), 8 bytes each, then the lengths of
// key, op, writer, value and prev, 4 bytes each.
const evHeader = 44

func newEventLog(next int64) eventLog {
	return eventLog{first: next, latest: map[string]int64{}}
}

func (l *eventLog) len() int { return len(l.events) }

// add appends e with the next id and returns that id.
func (l *eventLog) add(e *backend.Event) int64 {
	id := l.first + int64(len(l.events))
	var h [evHeader]byte
	binary.LittleEndian.PutUint64(h[:], uint64(e.Revision))
	binary.LittleEndian.PutUint64(h[8:], uint64(e.Time.UnixMilli()))
	binary.LittleEndian.PutUint64(h[16:], uint64(l.latest[e.Key]))
	for i, n := range [5]int{len(e.Key), len(e.Op), len(e.Writer), len(e.Value), len(e.Prev)} {
		binary.LittleEndian.PutUint32(h[24+4*i:], uint32(n))
	}
	var b strings.Builder
	b.Grow(evHeader + len(e.Key) + len(e.Op) + len(e.Writer) + len(e.Value) + len(e.Prev))
	b.Write(h[:])
	b.WriteString(e.Key)
	b.WriteString(e.Op)
	b.WriteString(e.Writer)
	b.Write(e.Value)
	b.Write(e.Prev)
	s := b.String()
	l.events = append(l.events, s)
	l.latest[eventKey(s)] = id // rekeyed to this event's bytes
	return id
}

// le64 and le32 read little-endian integers at the start of s.
func le64(s string) int64 {
	_ = s[7]
	return int64(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// get unpacks the event with id.
func (l *eventLog) get(id int64) backend.Event {
	s := l.events[id-l.first]
	e := backend.Event{ID: id, Revision: le64(s), Time: eventTime(s)}
	body := s[evHeader:]
	var parts [5]string
	for i := range parts {
		n := le32(s[24+4*i:])
		parts[i], body = body[:n], body[n:]
	}
	e.Key, e.Op, e.Writer = parts[0], parts[1], parts[2]
	if parts[3] != "" {
		e.Value = []byte(parts[3])
	}
	if parts[4] != "" {
		e.Prev = []byte(parts[4])
	}
	return e
}

// eventKey returns the key of the packed event s.
func eventKey(s string) string { return s[evHeader : evHeader+int(le32(s[24:]))] }

// eventTime returns the time of the packed event s.
func eventTime(s string) time.Time { return time.UnixMilli(le64(s[8:])).UTC() }

// previous returns the id of the event of the same key before the packed
// event s, or 0.
func previous(s string) int64 { return le64(s[16:]) }

// read returns up to limit events, newest first, with id < before (0: no
// bound) and, when key is set, of that key.
func (l *eventLog) read(key string, before int64, limit int) []backend.Event {
	var out []backend.Event
	top := l.first + int64(len(l.events)) - 1
	if before != 0 {
		top = min(top, before-1)
	}
	if key == "" {
		for id := top; id >= l.first && len(out) < limit; id-- {
			out = append(out, l.get(id))
		}
		return out
	}
	id := l.latest[key]
	for id > top && id >= l.first { // after before: follow the chain down to it
		id = previous(l.events[id-l.first])
	}
	for ; id >= l.first && len(out) < limit; id = previous(l.events[id-l.first]) {
		out = append(out, l.get(id))
	}
	return out
}

// trim drops the oldest events while drop says so, at most limit of them,
// and returns how many it dropped.
func (l *eventLog) trim(limit int64, drop func(left int, s string) bool) int64 {
	var n int64
	for n < limit && len(l.events) > 0 && drop(len(l.events), l.events[0]) {
		k := eventKey(l.events[0])
		if l.latest[k] == l.first { // the key's only event left
			delete(l.latest, k)
		}
		l.events[0] = "" // let the collector have it
		l.events = l.events[1:]
		l.first++
		n++
	}
	if cap(l.events) > 64 && len(l.events) < cap(l.events)/4 {
		l.events = append([]string(nil), l.events...) // give back the array the trimmed events held
	}
	return n
}
