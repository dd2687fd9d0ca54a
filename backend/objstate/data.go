package objstate

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/btree"
	"github.com/statesidecar/state/backend"
)

// rec is one record. A stored rec is never changed: a write stores a new
// one, so that a snapshot taken by cloning the key order (copy on write)
// keeps the records it holds as they were.
type rec struct {
	key, writer, value string
	rev, crev          int64
	upd, exp           int64 // Unix ms; exp 0: never expires; upd zeroMs: no time
}

// zeroMs is the Unix ms of the zero time.Time, which stands for "no time".
var zeroMs = time.Time{}.UnixMilli()

func toMs(t time.Time) int64 {
	if t.IsZero() {
		return zeroMs
	}
	return t.UnixMilli()
}

func fromMs(ms int64) time.Time {
	if ms == zeroMs {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func (r *rec) live(nowMs int64) bool { return r.exp == 0 || r.exp > nowMs }

// record copies r out: callers never share memory with the cache.
func (r *rec) record() backend.Record {
	out := backend.Record{Key: r.key, Writer: r.writer, Revision: r.rev, CreateRevision: r.crev, UpdatedAt: fromMs(r.upd)}
	if r.exp != 0 {
		out.ExpiresAt = fromMs(r.exp)
	}
	if r.value != "" {
		out.Value = []byte(r.value)
	}
	return out
}

// due is a record's place in the order of expiry.
type due struct {
	exp int64
	key string
}

// data is one namespace as of the commit at position pos: its records by
// key, in key order and by expiry, its history, and the counters that
// survive a Reset. Only the namespace's leader changes it (under the
// space's write lock); readers read it under the read lock.
type data struct {
	pos     int64    // the last commit applied; 0: none
	ids     []string // the ids of the commits from idsFrom to pos
	idsFrom int64
	rev     int64 // the last revision given
	recs    map[string]*rec
	order   *btree.BTreeG[*rec]
	expiry  *btree.BTreeG[due]
	log     eventLog
}

// recentIDs is how many commit ids a namespace remembers (and a snapshot
// keeps): a writer that did not learn whether its write of the head
// landed finds its commit among them when it reads the head again, even
// if a snapshot took the commit in meanwhile.
const recentIDs = 1024

// noted records that the commit at pos, with id, was applied.
func (d *data) noted(pos int64, id string) {
	d.pos = pos
	if len(d.ids) == 0 || d.idsFrom+int64(len(d.ids)) != pos {
		d.ids, d.idsFrom = nil, pos
	}
	d.ids = append(d.ids, id)
	if len(d.ids) >= 2*recentIDs {
		d.ids = append([]string(nil), d.ids[len(d.ids)-recentIDs:]...)
		d.idsFrom = pos - recentIDs + 1
	}
}

// commitID returns the id of the commit at pos, if remembered.
func (d *data) commitID(pos int64) (string, bool) {
	if pos < d.idsFrom || pos >= d.idsFrom+int64(len(d.ids)) {
		return "", false
	}
	return d.ids[pos-d.idsFrom], true
}

// lastIDs returns the ids of the last commits, at most recentIDs.
func (d *data) lastIDs() (from int64, ids []string) {
	ids = d.ids
	if len(ids) > recentIDs {
		ids = ids[len(ids)-recentIDs:]
	}
	return d.pos - int64(len(ids)) + 1, slices.Clone(ids)
}

func newData() *data {
	d := &data{log: newEventLog(1)}
	d.clear()
	return d
}

// clear removes every record and event, keeping the counters.
func (d *data) clear() {
	d.recs = map[string]*rec{}
	d.order = btree.NewG(32, func(a, b *rec) bool { return a.key < b.key })
	d.expiry = btree.NewG(32, func(a, b due) bool { return a.exp < b.exp || (a.exp == b.exp && a.key < b.key) })
	d.log = newEventLog(d.log.next())
}

func (d *data) get(key string) *rec { return d.recs[key] }

func (d *data) put(r *rec) {
	old := d.recs[r.key]
	if old != nil && old.exp != 0 && old.exp != r.exp {
		d.expiry.Delete(due{old.exp, old.key})
	}
	d.recs[r.key] = r
	d.order.ReplaceOrInsert(r)
	if r.exp != 0 {
		d.expiry.ReplaceOrInsert(due{r.exp, r.key})
	}
}

func (d *data) del(key string) {
	old := d.recs[key]
	if old == nil {
		return
	}
	delete(d.recs, key)
	d.order.Delete(&rec{key: key})
	if old.exp != 0 {
		d.expiry.Delete(due{old.exp, key})
	}
}

func (d *data) reset()             { d.clear() }
func (d *data) trim(below int64)   { d.log.trimBelow(below) }
func (d *data) bumpRev() int64     { d.rev++; return d.rev }
func (d *data) raiseRev(f int64)   { d.rev = max(d.rev, f) }
func (d *data) addEvent(e *event)  { d.log.add(e) }
func (d *data) nextEventID() int64 { return d.log.next() }

// scan calls fn on the records whose keys start with prefix and sort
// strictly after after, in key order, until fn returns false.
func (d *data) scan(prefix, after string, fn func(*rec) bool) {
	from, skip := prefix, false
	if after >= prefix && after != "" {
		from, skip = after, true
	}
	d.order.AscendGreaterOrEqual(&rec{key: from}, func(r *rec) bool {
		if skip && r.key == from {
			return true
		}
		if !strings.HasPrefix(r.key, prefix) {
			return false
		}
		return fn(r)
	})
}

// count counts the records under prefix live at nowMs, or all of them when
// all is set.
func (d *data) count(prefix string, nowMs int64, all bool) int64 {
	var n int64
	d.scan(prefix, "", func(r *rec) bool {
		if all || r.live(nowMs) {
			n++
		}
		return true
	})
	return n
}

// view is what applying an entry reads and writes: a namespace's data, or
// an overlay on it for a group commit being built.
type view interface {
	get(key string) *rec
	put(r *rec)
	del(key string)
	reset()
	trim(below int64)
	bumpRev() int64
	raiseRev(floor int64)
	nextEventID() int64
	addEvent(e *event)
}

// apply applies e to v and returns the revision it wrote at (0 when it
// wrote no record and no event). Its conditions were checked when it was
// committed: applying it again, anywhere, gives the same result, which is
// how every process rebuilds the namespace from the log.
func apply(v view, e *entry) int64 {
	if e.reset {
		v.reset()
	}
	for _, k := range e.drop {
		v.del(k)
	}
	if e.trimBelow > 0 {
		v.trim(e.trimBelow)
	}
	if e.revFloor > 0 {
		v.raiseRev(e.revFloor)
	}
	if len(e.ops) == 0 && len(e.events) == 0 {
		return 0
	}
	rev := v.bumpRev()
	for i := range e.events {
		ev := &e.events[i]
		out := &event{id: v.nextEventID(), rev: rev, key: ev.key, op: ev.op, writer: ev.writer,
			value: ev.value, prev: ev.prev, time: ev.time}
		if ev.prevOf != "" {
			if r := v.get(ev.prevOf); r != nil && r.live(e.now) {
				out.prev = r.value
			}
		}
		v.addEvent(out)
	}
	for i := range e.ops {
		o := &e.ops[i]
		if o.kind == backend.OpDelete {
			v.del(o.key)
			continue
		}
		old := v.get(o.key)
		isLive := old != nil && old.live(e.now)
		value := o.value
		if o.kind == backend.OpAdd {
			var cur int64
			if isLive {
				cur, _ = strconv.ParseInt(old.value, 10, 64)
			}
			delta, _ := strconv.ParseInt(value, 10, 64)
			value = strconv.FormatInt(cur+delta, 10)
		}
		r := &rec{key: o.key, writer: o.writer, value: value, rev: rev, crev: rev, upd: o.time, exp: o.exp}
		if isLive {
			r.crev = old.crev
		}
		v.put(r)
	}
	return rev
}

// overlay is a view of a group commit being built: the writes of the
// entries accepted so far over the namespace's data, which stays as it is
// until the group is committed.
type overlay struct {
	base    *data
	cleared bool            // a Reset hides every record of base
	recs    map[string]*rec // nil: deleted
	rev     int64
	eid     int64
}

func newOverlay(base *data) *overlay {
	return &overlay{base: base, recs: map[string]*rec{}, rev: base.rev, eid: base.log.next()}
}

func (o *overlay) get(key string) *rec {
	if r, ok := o.recs[key]; ok {
		return r
	}
	if o.cleared {
		return nil
	}
	return o.base.get(key)
}

func (o *overlay) put(r *rec)         { o.recs[r.key] = r }
func (o *overlay) del(key string)     { o.recs[key] = nil }
func (o *overlay) reset()             { o.cleared = true; clear(o.recs) }
func (o *overlay) trim(int64)         {}
func (o *overlay) bumpRev() int64     { o.rev++; return o.rev }
func (o *overlay) raiseRev(f int64)   { o.rev = max(o.rev, f) }
func (o *overlay) nextEventID() int64 { return o.eid }
func (o *overlay) addEvent(*event)    { o.eid++ }
