package objstate

import (
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

// build turns a group of calls into one attempt: each call is checked and
// applied, in order, to an overlay on the cache (so that a call sees the
// writes of the calls before it), and the entries of those that write
// make the commit. The cache itself is left as it is.
func (s *space) build(group []*item) *attempt {
	d := s.data
	ov := newOverlay(d)
	a := &attempt{outs: make([]outcome, len(group))}
	var entries []entry
	clock := s.d.now()
	for i, it := range group {
		out := &a.outs[i]
		switch it.kind {
		case kindTxn:
			out.res = commitTxn(ov, it.txn, orNow(it.txn.Now, clock), &entries)
		case kindUpdate:
			now := orNow(it.q.Now, clock)
			recs := getMany(ov, it.q, now.UnixMilli())
			txn, err := callUpdate(it.fn, recs, now)
			switch {
			case err != nil:
				out.err = err
			case txn == nil:
				out.res = backend.Result{Committed: true, Failed: -1, Now: now}
			default:
				out.res = commitTxn(ov, txn, now, &entries)
			}
		case kindReset:
			out.reset.Events = int64(len(d.log.evs))
			for _, p := range it.resetQ.CountPrefixes {
				out.reset.Records += d.count(p, 0, true)
			}
			e := entry{now: clock.UnixMilli(), reset: true}
			apply(ov, &e)
			entries = append(entries, e)
		case kindSweep:
			if e, ok := sweepEntry(d, it.sweepQ, orNow(it.sweepQ.Now, clock), &out.sweep); ok {
				apply(ov, &e)
				entries = append(entries, e)
			}
		case kindTrim:
			over := int64(len(d.log.evs)) - it.trimQ.Keep
			if n := min(over, int64(it.trimQ.Limit)); n > 0 {
				e := entry{now: clock.UnixMilli(), trimBelow: d.log.first + n}
				apply(ov, &e)
				entries = append(entries, e)
				out.trim = backend.TrimResult{Events: n, More: over > n}
			}
		case kindFloor:
			if it.floor > ov.rev {
				e := entry{now: clock.UnixMilli(), revFloor: it.floor}
				apply(ov, &e)
				entries = append(entries, e)
			}
		case kindMerge:
			switch h := s.head; {
			case h != nil && h.holdsRun([]string{it.merge.seg.Key}):
				// Named by a write whose answer was lost: what it
				// replaced is named no more.
				out.applied, out.dropped = true, it.merge.replaced
			case h != nil && h.holdsRun(it.merge.replaced):
				a.merge = it.merge
			}
		case kindSnapshot:
			switch h := s.head; {
			case h != nil && h.snap != nil && h.snap.Parts[0] == it.snap.Parts[0]:
				out.applied = true // by a write whose answer was lost
			case h != nil && it.snap.Pos > h.base() && it.snap.Pos <= h.pos:
				a.snap = it.snap
			}
		}
	}
	if len(entries) > 0 {
		a.commit = &commit{pos: d.pos + 1, id: newID(), entries: entries}
		a.raw = encodeCommit(a.commit)
		a.rev, a.event = ov.rev, ov.eid-1
	}
	return a
}

func orNow(t, clock time.Time) time.Time {
	if t.IsZero() {
		return clock
	}
	return t
}

// commitTxn checks txn's conditions at now and, if they hold, applies it
// to ov and adds its entry.
func commitTxn(ov *overlay, txn *backend.Txn, now time.Time, entries *[]entry) backend.Result {
	nowMs := now.UnixMilli()
	for i, c := range txn.If {
		var cur int64
		if r := ov.get(c.Key); r != nil && r.live(nowMs) {
			cur = r.rev
		}
		if cur != c.Revision {
			return backend.Result{Failed: i, Current: cur, Now: now}
		}
	}
	res := backend.Result{Committed: true, Failed: -1, Now: now}
	if len(txn.Then) == 0 && len(txn.Events) == 0 {
		return res
	}
	e := toEntry(txn, nowMs)
	res.Revision = apply(ov, &e)
	*entries = append(*entries, e)
	return res
}

// getMany reads q's keys from v as GetMany does.
func getMany(v view, q *backend.GetQuery, nowMs int64) []backend.Record {
	out := make([]backend.Record, len(q.Keys))
	for i, k := range q.Keys {
		r := v.get(k)
		switch {
		case r == nil:
			out[i] = backend.Record{Key: k}
		case r.live(nowMs):
			out[i] = r.record()
		case q.IncludeExpired:
			out[i] = r.record()
			out[i].Expired = true
		default:
			out[i] = backend.Record{Key: k}
		}
	}
	return out
}

// callUpdate calls an Updater's function, turning a panic into an error:
// it runs on the leader, whose panic would end the process.
func callUpdate(fn func([]backend.Record, time.Time) (*backend.Txn, error), recs []backend.Record, now time.Time) (txn *backend.Txn, err error) {
	defer func() {
		if p := recover(); p != nil {
			txn, err = nil, fmt.Errorf("objstate: the update function panicked: %v", p)
		}
	}()
	return fn(recs, now)
}

// sweepEntry returns the entry that removes what q sweeps from d (expired
// records, old events), if anything, and reports what it removes in res.
func sweepEntry(d *data, q *backend.SweepQuery, now time.Time, res *backend.SweepResult) (entry, bool) {
	limit := q.Limit
	cutoff := now.Add(-q.Grace).UnixMilli()
	e := entry{now: now.UnixMilli()}
	d.expiry.Ascend(func(x due) bool {
		if x.exp > cutoff {
			return false
		}
		if len(e.drop) == limit {
			res.More = true
			return false
		}
		e.drop = append(e.drop, x.key)
		return true
	})
	oldest := now.Add(-q.HistoryMaxAge).UnixMilli()
	var n int64
	for i, ev := range d.log.evs {
		left := int64(len(d.log.evs) - i)
		if !(q.HistoryMaxAge > 0 && ev.time < oldest) && !(q.HistoryMaxEvents > 0 && left > q.HistoryMaxEvents) {
			break
		}
		if n == int64(limit) {
			res.More = true
			break
		}
		n++
	}
	if n > 0 {
		e.trimBelow = d.log.first + n
	}
	res.Records, res.Events = int64(len(e.drop)), n
	return e, len(e.drop) > 0 || n > 0
}
