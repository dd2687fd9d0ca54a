// Package memstate is an in-memory backend for package state: for tests and
// ephemeral use. Nothing survives the process.
//
// It implements every optional interface that makes sense in one process
// (backend.Updater and backend.Sweeper) and registers the "mem" URL scheme:
// "mem://name" opens the same store for the same name while it is open, and
// "mem://" a fresh one.
package memstate

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	"github.com/statesidecar/state/backend"
)

// Driver is an in-memory backend.Driver. Create one with New.
type Driver struct {
	mu      sync.Mutex
	closed  bool
	rev     int64
	spaces  map[string]*space
	eventID map[string]int64 // last event ID per namespace; survives Reset
	onClose func()
}

type space struct {
	recs   *btree.BTreeG[*backend.Record]
	events []backend.Event // ascending ID
}

var (
	_ backend.Driver  = (*Driver)(nil)
	_ backend.Updater = (*Driver)(nil)
	_ backend.Sweeper = (*Driver)(nil)
)

// New returns an empty in-memory driver.
func New() *Driver {
	return &Driver{spaces: map[string]*space{}, eventID: map[string]int64{}}
}

// Name returns "memory".
func (d *Driver) Name() string { return "memory" }

func lessKey(a, b *backend.Record) bool { return a.Key < b.Key }

// sp returns namespace ns, creating it.
func (d *Driver) sp(ns string) *space {
	s := d.spaces[ns]
	if s == nil {
		s = &space{recs: btree.NewG(32, lessKey)}
		d.spaces[ns] = s
	}
	return s
}

// lock takes the driver's lock after checking ctx and Close.
func (d *Driver) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return backend.ErrClosed
	}
	return nil
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC().Truncate(time.Millisecond)
	}
	return t
}

func live(r *backend.Record, now time.Time) bool {
	return r.ExpiresAt.IsZero() || r.ExpiresAt.After(now)
}

// clone copies a record so that callers never share memory with the store.
func clone(r *backend.Record) backend.Record {
	c := *r
	c.Value = append([]byte(nil), r.Value...)
	return c
}

// Get implements backend.Driver.
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	if err := d.lock(ctx); err != nil {
		return backend.Record{}, err
	}
	defer d.mu.Unlock()
	r, ok := d.sp(ns).recs.Get(&backend.Record{Key: key})
	if !ok || !live(r, nowOr(now)) {
		return backend.Record{}, backend.ErrNotFound
	}
	return clone(r), nil
}

// GetMany implements backend.Driver.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	if err := d.lock(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return d.getMany(q, nowOr(q.Now)), nil
}

func (d *Driver) getMany(q *backend.GetQuery, now time.Time) []backend.Record {
	s := d.sp(q.NS)
	out := make([]backend.Record, len(q.Keys))
	for i, k := range q.Keys {
		out[i] = backend.Record{Key: k}
		r, ok := s.recs.Get(&backend.Record{Key: k})
		switch {
		case !ok:
		case live(r, now):
			out[i] = clone(r)
		case q.IncludeExpired:
			out[i] = clone(r)
			out[i].Expired = true
		}
	}
	return out
}

// List implements backend.Driver.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	if err := d.lock(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := nowOr(q.Now)
	var out []backend.Record
	d.sp(q.NS).recs.AscendGreaterOrEqual(&backend.Record{Key: q.Prefix}, func(r *backend.Record) bool {
		if !strings.HasPrefix(r.Key, q.Prefix) {
			return false
		}
		if r.Key <= q.After || !live(r, now) {
			return true
		}
		c := clone(r)
		if q.KeysOnly {
			c.Value = nil
		}
		out = append(out, c)
		return len(out) < q.Limit
	})
	return out, nil
}

// Count implements backend.Driver.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	if err := d.lock(ctx); err != nil {
		return backend.Counts{}, err
	}
	defer d.mu.Unlock()
	now := nowOr(q.Now)
	s := d.sp(q.NS)
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes)), Events: int64(len(s.events))}
	for i, p := range q.Prefixes {
		c.Prefixes[i] = s.count(p, func(r *backend.Record) bool { return live(r, now) })
	}
	return c, nil
}

// count counts the records under prefix p for which ok holds.
func (s *space) count(p string, ok func(*backend.Record) bool) int64 {
	var n int64
	s.recs.AscendGreaterOrEqual(&backend.Record{Key: p}, func(r *backend.Record) bool {
		if !strings.HasPrefix(r.Key, p) {
			return false
		}
		if ok(r) {
			n++
		}
		return true
	})
	return n
}

// Commit implements backend.Driver.
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	if err := d.lock(ctx); err != nil {
		return backend.Result{}, err
	}
	defer d.mu.Unlock()
	return d.apply(txn.NS, txn, nowOr(txn.Now)), nil
}

// Update implements backend.Updater.
func (d *Driver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	if err := d.lock(ctx); err != nil {
		return backend.Result{}, err
	}
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
	s := d.sp(ns)
	for i, c := range txn.If {
		var cur int64
		if r, ok := s.recs.Get(&backend.Record{Key: c.Key}); ok && live(r, now) {
			cur = r.Revision
		}
		if cur != c.Revision {
			return backend.Result{Failed: i, Current: cur, Now: now}
		}
	}
	res := backend.Result{Committed: true, Failed: -1, Now: now}
	if len(txn.Then) == 0 && len(txn.Events) == 0 {
		return res
	}
	d.rev++
	res.Revision = d.rev
	for _, e := range txn.Events {
		if e.PrevOf != "" {
			if r, ok := s.recs.Get(&backend.Record{Key: e.PrevOf}); ok && live(r, now) {
				e.Prev = r.Value
			}
			e.PrevOf = ""
		}
		d.eventID[ns]++
		e.ID, e.Revision = d.eventID[ns], d.rev
		if e.Time.IsZero() {
			e.Time = now
		}
		e.Value = append([]byte(nil), e.Value...)
		e.Prev = append([]byte(nil), e.Prev...)
		if len(e.Value) == 0 {
			e.Value = nil
		}
		if len(e.Prev) == 0 {
			e.Prev = nil
		}
		s.events = append(s.events, e)
	}
	for _, op := range txn.Then {
		switch op.Kind {
		case backend.OpPut:
			r := &backend.Record{Key: op.Key, Value: append([]byte(nil), op.Value...), Writer: op.Writer,
				Revision: d.rev, CreateRevision: d.rev, UpdatedAt: op.Time}
			if old, ok := s.recs.Get(r); ok && live(old, now) {
				r.CreateRevision = old.CreateRevision
			}
			if op.TTL > 0 {
				r.ExpiresAt = now.Add(op.TTL)
			}
			s.recs.ReplaceOrInsert(r)
		case backend.OpDelete:
			s.recs.Delete(&backend.Record{Key: op.Key})
		}
	}
	return res
}

// History implements backend.Driver.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	if err := d.lock(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	evs := d.sp(q.NS).events
	var out []backend.Event
	for i := len(evs) - 1; i >= 0 && len(out) < q.Limit; i-- {
		e := evs[i]
		if (q.Before != 0 && e.ID >= q.Before) || (q.Key != "" && e.Key != q.Key) {
			continue
		}
		e.Value = append([]byte(nil), e.Value...)
		e.Prev = append([]byte(nil), e.Prev...)
		if len(e.Value) == 0 {
			e.Value = nil
		}
		if len(e.Prev) == 0 {
			e.Prev = nil
		}
		out = append(out, e)
	}
	return out, nil
}

// Reset implements backend.Driver.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	if err := d.lock(ctx); err != nil {
		return backend.ResetResult{}, err
	}
	defer d.mu.Unlock()
	s := d.sp(q.NS)
	res := backend.ResetResult{Events: int64(len(s.events))}
	for _, p := range q.CountPrefixes {
		res.Records += s.count(p, func(*backend.Record) bool { return true })
	}
	delete(d.spaces, q.NS)
	return res, nil
}

// Sweep implements backend.Sweeper.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	if err := d.lock(ctx); err != nil {
		return backend.SweepResult{}, err
	}
	defer d.mu.Unlock()
	now := nowOr(q.Now)
	cutoff := now.Add(-q.Grace)
	var res backend.SweepResult
	for _, s := range d.spaces {
		var dead []*backend.Record
		s.recs.Ascend(func(r *backend.Record) bool {
			if !live(r, cutoff) {
				if int64(len(dead))+res.Records == int64(q.Limit) {
					res.More = true
					return false
				}
				dead = append(dead, r)
			}
			return true
		})
		for _, r := range dead {
			s.recs.Delete(r)
		}
		res.Records += int64(len(dead))
		n := 0 // events to drop from the front
		for n < len(s.events) && int64(n) < int64(q.Limit)-res.Events {
			tooOld := q.HistoryMaxAge > 0 && s.events[n].Time.Before(now.Add(-q.HistoryMaxAge))
			tooMany := q.HistoryMaxEvents > 0 && int64(len(s.events)-n) > q.HistoryMaxEvents
			if !tooOld && !tooMany {
				break
			}
			n++
		}
		if n > 0 {
			s.events = append([]backend.Event(nil), s.events[n:]...)
			res.Events += int64(n)
			if res.Events == int64(q.Limit) {
				res.More = true
			}
		}
	}
	return res, nil
}

// Close implements backend.Driver.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return backend.ErrClosed
	}
	d.closed = true
	d.spaces = nil
	if d.onClose != nil {
		d.onClose()
	}
	return nil
}
