package objstate

import "github.com/statesidecar/state/backend"

// event is one history event. A stored event is never changed, so that a
// snapshot can hold a copy of the log's slice while the log goes on.
type event struct {
	id, rev         int64
	key, op, writer string
	value, prev     string // "": none
	time            int64  // Unix ms
	before          int64  // id of the key's previous event; 0: none (set by the log)
}

func (e *event) out() backend.Event {
	o := backend.Event{ID: e.id, Revision: e.rev, Key: e.key, Op: e.op, Writer: e.writer, Time: fromMs(e.time)}
	if e.value != "" {
		o.Value = []byte(e.value)
	}
	if e.prev != "" {
		o.Prev = []byte(e.prev)
	}
	return o
}

// eventLog is one namespace's history in id order. Each event knows the id
// of its key's previous event and latest each key's newest, so that one
// key's history follows its own events instead of scanning the log.
type eventLog struct {
	first  int64 // id of evs[0], or the next id when evs is empty
	evs    []*event
	latest map[string]int64
}

func newEventLog(next int64) eventLog {
	return eventLog{first: next, latest: map[string]int64{}}
}

// next returns the id the next event gets.
func (l *eventLog) next() int64 { return l.first + int64(len(l.evs)) }

// add appends e, whose id must be next().
func (l *eventLog) add(e *event) {
	e.before = l.latest[e.key]
	l.evs = append(l.evs, e)
	l.latest[e.key] = e.id
}

func (l *eventLog) at(id int64) *event { return l.evs[id-l.first] }

// trimBelow drops the events whose ids are below id.
func (l *eventLog) trimBelow(id int64) {
	n := min(id-l.first, int64(len(l.evs)))
	if n <= 0 {
		return
	}
	for _, e := range l.evs[:n] {
		if l.latest[e.key] == e.id { // the key's last event goes
			delete(l.latest, e.key)
		}
	}
	// The dropped events stay in the array (a snapshot being written may
	// read them) until it is copied when most of it is dead.
	l.evs = l.evs[n:]
	l.first += n
	if cap(l.evs) > 1024 && len(l.evs) < cap(l.evs)/4 {
		l.evs = append([]*event(nil), l.evs...)
	}
}

// read returns up to limit events, newest first, with id < before (0: no
// bound) and, when key is set, of that key.
func (l *eventLog) read(key string, before int64, limit int) []backend.Event {
	var out []backend.Event
	top := l.next() - 1
	if before != 0 {
		top = min(top, before-1)
	}
	if key == "" {
		for id := top; id >= l.first && len(out) < limit; id-- {
			out = append(out, l.at(id).out())
		}
		return out
	}
	id := l.latest[key]
	for id > top && id >= l.first {
		id = l.at(id).before
	}
	for ; id >= l.first && id > 0 && len(out) < limit; id = l.at(id).before {
		out = append(out, l.at(id).out())
	}
	return out
}
