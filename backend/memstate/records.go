package memstate

import (
	"strconv"
	"strings"
	"time"

	"github.com/google/btree"
	"github.com/statesidecar/state/backend"
)

// rec is one stored record, kept compact: its key, writer and value in one
// immutable string (one allocation, so that finding a key and reading its
// value touch the same memory; the map of records is keyed by the key in
// it) and times in Unix milliseconds (the precision of the contract).
type rec struct {
	kwv        string // key, writer, value
	klen, wlen uint32
	rev, crev  int64
	upd, exp   int64 // exp 0: never expires
}

func (r *rec) key() string    { return r.kwv[:r.klen] }
func (r *rec) writer() string { return r.kwv[r.klen : r.klen+r.wlen] }
func (r *rec) value() string  { return r.kwv[r.klen+r.wlen:] }

// setKWV sets the record's key, writer and value, in one new string.
func (r *rec) setKWV(key, writer string, value []byte) {
	var b strings.Builder
	b.Grow(len(key) + len(writer) + len(value))
	b.WriteString(key)
	b.WriteString(writer)
	b.Write(value)
	r.kwv, r.klen, r.wlen = b.String(), uint32(len(key)), uint32(len(writer))
}

func (r *rec) live(nowMs int64) bool { return r.exp == 0 || r.exp > nowMs }

// record copies r out, so that callers never share mutable memory with the
// store (its strings are immutable).
func (r *rec) record() backend.Record {
	out := backend.Record{Key: r.key(), Writer: r.writer(), Revision: r.rev, CreateRevision: r.crev,
		UpdatedAt: msTime(r.upd)}
	if r.exp != 0 {
		out.ExpiresAt = msTime(r.exp)
	}
	if v := r.value(); v != "" {
		out.Value = []byte(v)
	}
	return out
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// item is a record's place in the key order: its key inline, so that a
// search touches the keys it compares and not the records. The key is a
// copy of its own, which outlives the record's strings as they are
// rewritten (or the record's first string when that holds the key alone,
// as an index entry's does).
type item struct {
	key string
	r   *rec
}

// due is a record's place in the order of expiry.
type due struct {
	exp int64
	key string
}

// space is one namespace: its records by key (point reads and writes cost
// the same at any size), in key order (listing), by expiry (sweeping), and
// its history. byKey's keys are the keys inside the records' strings, and
// order's and expiry's the copy in item.
type space struct {
	byKey  map[string]*rec
	order  *btree.BTreeG[item]
	expiry *btree.BTreeG[due]
	log    eventLog
}

func newSpace(nextEvent int64) *space {
	return &space{
		byKey: map[string]*rec{},
		order: btree.NewG(32, func(a, b item) bool { return a.key < b.key }),
		expiry: btree.NewG(32, func(a, b due) bool {
			return a.exp < b.exp || (a.exp == b.exp && a.key < b.key)
		}),
		log: newEventLog(nextEvent),
	}
}

// put writes a record as an OpPut or OpAdd of txn at revision rev.
func (s *space) put(op *backend.Op, rev int64, now time.Time) {
	nowMs := now.UnixMilli()
	old := s.byKey[op.Key]
	isLive := old != nil && old.live(nowMs)
	value := op.Value
	if op.Kind == backend.OpAdd {
		var cur int64
		if isLive {
			cur, _ = strconv.ParseInt(old.value(), 10, 64)
		}
		d, _ := strconv.ParseInt(string(value), 10, 64)
		value = strconv.AppendInt(nil, cur+d, 10)
	}
	var exp int64
	if op.TTL > 0 {
		exp = now.Add(op.TTL).UnixMilli()
	}
	if old == nil {
		r := &rec{rev: rev, crev: rev, upd: op.Time.UnixMilli(), exp: exp}
		r.setKWV(op.Key, op.Writer, value)
		key := r.key()
		s.byKey[key] = r
		if len(r.kwv) > len(key) { // else the string is the key alone, and outliving the record costs no more than a copy
			key = strings.Clone(key)
		}
		s.order.ReplaceOrInsert(item{key, r})
		if exp != 0 {
			s.expiry.ReplaceOrInsert(due{exp, key})
		}
		return
	}
	if old.exp != exp {
		if old.exp != 0 {
			s.expiry.Delete(due{old.exp, op.Key})
		}
		if exp != 0 {
			s.expiry.ReplaceOrInsert(due{exp, strings.Clone(op.Key)})
		}
	}
	if !isLive {
		old.crev = rev
	}
	if old.writer() != op.Writer || old.value() != string(value) {
		old.setKWV(op.Key, op.Writer, value)
		s.byKey[old.key()] = old // an assignment stores the new key string too, so the old one can go
	}
	old.rev, old.upd, old.exp = rev, op.Time.UnixMilli(), exp
}

// del removes the record at key, if any.
func (s *space) del(key string) {
	r := s.byKey[key]
	if r == nil {
		return
	}
	delete(s.byKey, key)
	s.order.Delete(item{key: key})
	if r.exp != 0 {
		s.expiry.Delete(due{r.exp, key})
	}
}

// scan calls fn on the items whose keys start with prefix and sort
// strictly after after (inclusive of prefix itself when after is below
// it), in key order, until fn returns false.
func (s *space) scan(prefix, after string, fn func(item) bool) {
	from, skip := prefix, false
	if after >= prefix && after != "" {
		from, skip = after, true
	}
	s.order.AscendGreaterOrEqual(item{key: from}, func(it item) bool {
		if skip && it.key == from {
			return true
		}
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		return fn(it)
	})
}

// count counts the records under prefix p that are live at nowMs, or all
// when nowMs is 0.
func (s *space) count(p string, nowMs int64) int64 {
	var n int64
	s.scan(p, "", func(it item) bool {
		if nowMs == 0 || it.r.live(nowMs) {
			n++
		}
		return true
	})
	return n
}

// sweep removes up to limit records expired at cutoff and reports how
// many it removed and whether more remain.
func (s *space) sweep(cutoffMs int64, limit int64) (int64, bool) {
	var dead []string
	more := false
	s.expiry.Ascend(func(d due) bool {
		if d.exp > cutoffMs {
			return false
		}
		if int64(len(dead)) == limit {
			more = true
			return false
		}
		dead = append(dead, d.key)
		return true
	})
	for _, k := range dead {
		s.del(k)
	}
	return int64(len(dead)), more
}
