// Package memstate is an in-memory backend for package state: for tests and
// ephemeral use. Nothing survives the process.
//
// Revisions and event ids count per namespace, so that one namespace's
// writes are invisible in another's versions and fences.
//
// It implements every optional interface that makes sense in one process
// (backend.Updater, backend.Sweeper and backend.HistoryTrimmer) and registers the "mem" URL scheme:
// "mem://name" opens the same store for the same name while it is open, and
// "mem://" a fresh one.
package memstate

import (
	"context"
	"sync"
	"time"

	"github.com/statesidecar/state/backend"
)

// Driver is an in-memory backend.Driver. Create one with New.
type Driver struct {
	mu      sync.Mutex
	closed  bool // Close has been called
	spaces  map[string]*space
	revs    map[string]int64 // last revision per namespace; survives Reset
	eventID map[string]int64 // last event ID per namespace; survives Reset
	onClose func()
	// listeners are told of every change (Notify).
	listeners listeners
}

var (
	_ backend.Driver         = (*Driver)(nil)
	_ backend.Updater        = (*Driver)(nil)
	_ backend.Sweeper        = (*Driver)(nil)
	_ backend.HistoryTrimmer = (*Driver)(nil)
)

// New returns an empty in-memory driver.
func New() *Driver {
	return &Driver{spaces: map[string]*space{}, revs: map[string]int64{}, eventID: map[string]int64{}}
}

// Name returns "memory".
func (d *Driver) Name() string { return "memory" }

// sp returns namespace ns, creating it.
func (d *Driver) sp(ns string) *space {
	s := d.spaces[ns]
	if s == nil {
		s = newSpace(d.eventID[ns] + 1)
		d.spaces[ns] = s
	}
	return s
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC().Truncate(time.Millisecond)
	}
	return t
}

// Get implements backend.Driver.
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.sp(ns).byKey[key]
	if r == nil || !r.live(nowOr(now).UnixMilli()) {
		return backend.Record{}, backend.ErrNotFound
	}
	return r.record(), nil
}

// GetMany implements backend.Driver.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.getMany(q, nowOr(q.Now)), nil
}

func (d *Driver) getMany(q *backend.GetQuery, now time.Time) []backend.Record {
	s, nowMs := d.sp(q.NS), now.UnixMilli()
	out := make([]backend.Record, len(q.Keys))
	for i, k := range q.Keys {
		r := s.byKey[k]
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

// List implements backend.Driver.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	nowMs := nowOr(q.Now).UnixMilli()
	out := make([]backend.Record, 0, min(q.Limit, 64))
	d.sp(q.NS).scan(q.Prefix, q.After, func(it item) bool {
		switch {
		case !it.r.live(nowMs):
		case q.KeysOnly: // the key alone, from the item, not from the record's string
			out = append(out, backend.Record{Key: it.key})
		default:
			out = append(out, it.r.record())
		}
		return len(out) < q.Limit
	})
	return out, nil
}

// Count implements backend.Driver.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	nowMs := nowOr(q.Now).UnixMilli()
	s := d.sp(q.NS)
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes)), Events: int64(s.log.len())}
	for i, p := range q.Prefixes {
		c.Prefixes[i] = s.count(p, nowMs)
	}
	return c, nil
}

// Commit implements backend.Driver.
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.apply(txn.NS, txn, nowOr(txn.Now)), nil
}

// Update implements backend.Updater.
func (d *Driver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := nowOr(q.Now)
	txn, err := fn(d.getMany(q, now), now)
	if err != nil {
		return backend.Result{}, err
	}
	if txn == nil {
		return backend.Result{Committed: true, Failed: -1, Now: now}, nil
	}
	return d.apply(q.NS, txn, now), nil
}

// apply checks and applies txn in namespace ns; d.mu is held.
func (d *Driver) apply(ns string, txn *backend.Txn, now time.Time) backend.Result {
	s, nowMs := d.sp(ns), now.UnixMilli()
	for i, c := range txn.If {
		var cur int64
		if r := s.byKey[c.Key]; r != nil && r.live(nowMs) {
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
	d.revs[ns]++
	rev := d.revs[ns]
	res.Revision = rev
	defer d.changed(ns)
	for _, e := range txn.Events {
		if e.PrevOf != "" {
			if r := s.byKey[e.PrevOf]; r != nil && r.live(nowMs) {
				e.Prev = []byte(r.value())
			}
			e.PrevOf = ""
		}
		e.Revision = rev
		if e.Time.IsZero() {
			e.Time = now
		}
		d.eventID[ns] = s.log.add(&e)
	}
	for i := range txn.Then {
		switch op := &txn.Then[i]; op.Kind {
		case backend.OpPut, backend.OpAdd:
			s.put(op, rev, now)
		case backend.OpDelete:
			s.del(op.Key)
		}
	}
	return res
}

// History implements backend.Driver.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sp(q.NS).log.read(q.Key, q.Before, q.Limit), nil
}

// Reset implements backend.Driver.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sp(q.NS)
	res := backend.ResetResult{Events: int64(s.log.len())}
	for _, p := range q.CountPrefixes {
		res.Records += s.count(p, 0)
	}
	delete(d.spaces, q.NS)
	d.changed(q.NS)
	return res, nil
}

// Sweep implements backend.Sweeper. Expired records are found through the
// namespace's index by expiry, so a sweep costs what it removes.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := nowOr(q.Now)
	cutoff := now.Add(-q.Grace).UnixMilli()
	limit := int64(q.Limit)
	var res backend.SweepResult
	for _, s := range d.spaces {
		n, more := s.sweep(cutoff, limit-res.Records)
		res.Records += n
		res.More = res.More || more
		k := s.log.trim(limit-res.Events, func(left int, e string) bool {
			return (q.HistoryMaxAge > 0 && eventTime(e).Before(now.Add(-q.HistoryMaxAge))) ||
				(q.HistoryMaxEvents > 0 && int64(left) > q.HistoryMaxEvents)
		})
		res.Events += k
		if k > 0 && res.Events == limit {
			res.More = true
		}
	}
	return res, nil
}

// TrimHistory implements backend.HistoryTrimmer.
func (d *Driver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.spaces[q.NS]
	if s == nil {
		return backend.TrimResult{}, nil
	}
	over := int64(s.log.len()) - q.Keep
	n := min(over, int64(q.Limit))
	if n <= 0 {
		return backend.TrimResult{}, nil
	}
	n = s.log.trim(n, func(int, string) bool { return true })
	return backend.TrimResult{Events: n, More: over > n}, nil
}

// Close implements backend.Driver. Package state calls nothing after
// Close, and this driver does not check: a closed driver still answers
// from memory. A second Close returns backend.ErrClosed and does nothing,
// so that a store closed twice (by tests) never forgets a newer store of
// the same name (URLOpener).
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return backend.ErrClosed
	}
	d.closed = true
	if d.onClose != nil {
		d.onClose()
	}
	return nil
}
