package objstate

import (
	"context"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
)

// Reads wait for the cache to be current (space.current: one cheap
// request for all the reads that arrived meanwhile) and then read it.

// nowMs returns t, or the medium's clock when t is zero, in Unix ms.
func (d *Driver) nowMs(t time.Time) int64 {
	if t.IsZero() {
		return d.now().UnixMilli()
	}
	return t.UnixMilli()
}

// Get implements backend.Driver.
func (d *Driver) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	s, err := d.space(ctx, ns)
	if err != nil {
		return backend.Record{}, err
	}
	data, release, err := s.current(ctx)
	if err != nil {
		return backend.Record{}, d.closedErr(err)
	}
	defer release()
	r := data.get(key)
	if r == nil || !r.live(d.nowMs(now)) {
		return backend.Record{}, backend.ErrNotFound
	}
	return r.record(), nil
}

// GetMany implements backend.Driver.
func (d *Driver) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	s, err := d.space(ctx, q.NS)
	if err != nil {
		return nil, err
	}
	data, release, err := s.current(ctx)
	if err != nil {
		return nil, d.closedErr(err)
	}
	defer release()
	return getMany(data, q, d.nowMs(q.Now)), nil
}

// List implements backend.Driver.
func (d *Driver) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	s, err := d.space(ctx, q.NS)
	if err != nil {
		return nil, err
	}
	data, release, err := s.current(ctx)
	if err != nil {
		return nil, d.closedErr(err)
	}
	defer release()
	nowMs := d.nowMs(q.Now)
	out := make([]backend.Record, 0, min(q.Limit, 64))
	data.scan(q.Prefix, q.After, func(r *rec) bool {
		switch {
		case !r.live(nowMs):
		case q.KeysOnly:
			out = append(out, backend.Record{Key: r.key})
		default:
			out = append(out, r.record())
		}
		return len(out) < q.Limit
	})
	return out, nil
}

// Count implements backend.Driver.
func (d *Driver) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	s, err := d.space(ctx, q.NS)
	if err != nil {
		return backend.Counts{}, err
	}
	data, release, err := s.current(ctx)
	if err != nil {
		return backend.Counts{}, d.closedErr(err)
	}
	defer release()
	nowMs := d.nowMs(q.Now)
	c := backend.Counts{Prefixes: make([]int64, len(q.Prefixes)), Events: int64(len(data.log.evs))}
	for i, p := range q.Prefixes {
		c.Prefixes[i] = data.count(p, nowMs, false)
	}
	return c, nil
}

// History implements backend.Driver.
func (d *Driver) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	s, err := d.space(ctx, q.NS)
	if err != nil {
		return nil, err
	}
	data, release, err := s.current(ctx)
	if err != nil {
		return nil, d.closedErr(err)
	}
	defer release()
	return data.log.read(q.Key, q.Before, q.Limit), nil
}

// Commit implements backend.Driver: the Txn joins the namespace's next
// group commit.
func (d *Driver) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	out, err := d.submit(ctx, txn.NS, &item{kind: kindTxn, txn: txn})
	return out.res, err
}

// Update implements backend.Updater: fn runs when the namespace's next
// group commit is built, on the records as the calls before it in the
// group leave them, so that a claim or a lease takes one round trip. fn
// runs again when the group must be built again (another process wrote
// first).
func (d *Driver) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	out, err := d.submit(ctx, q.NS, &item{kind: kindUpdate, q: q, fn: fn})
	return out.res, err
}

// Reset implements backend.Driver.
func (d *Driver) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	out, err := d.submit(ctx, q.NS, &item{kind: kindReset, resetQ: q})
	return out.reset, err
}

// TrimHistory implements backend.HistoryTrimmer: the trim is a commit of
// its own, which writes no revision.
func (d *Driver) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	out, err := d.submit(ctx, q.NS, &item{kind: kindTrim, trimQ: q})
	return out.trim, err
}

// Sweep implements backend.Sweeper for the namespaces this driver has
// read or written since it opened (a namespace no process touches keeps
// its expired records, invisible, until one does): each gets a commit
// that removes its expired records and old events, and its orphaned
// objects are deleted.
func (d *Driver) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	if err := backend.Ended(ctx); err != nil {
		return backend.SweepResult{}, err
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return backend.SweepResult{}, backend.ErrClosed
	}
	spaces := make([]*space, 0, len(d.spaces))
	for _, s := range d.spaces {
		spaces = append(spaces, s)
	}
	d.mu.Unlock()
	var res backend.SweepResult
	for _, s := range spaces {
		left := q.Limit - int(max(res.Records, res.Events))
		if left <= 0 {
			res.More = true
			break
		}
		sq := *q
		sq.Limit = left
		out, err := s.submit(ctx, &item{kind: kindSweep, sweepQ: &sq})
		if err != nil {
			return res, d.closedErr(err)
		}
		res.Records += out.sweep.Records
		res.Events += out.sweep.Events
		res.More = res.More || out.sweep.More
	}
	return res, nil
}

// submit queues it in namespace ns and waits for its outcome.
func (d *Driver) submit(ctx context.Context, ns string, it *item) (outcome, error) {
	s, err := d.space(ctx, ns)
	if err != nil {
		return outcome{}, err
	}
	out, err := s.submit(ctx, it)
	if err != nil {
		return out, d.closedErr(err)
	}
	return out, nil
}

// RaiseRevision makes the revisions namespace ns gives from now on greater
// than floor (it does nothing if they already are), so that a copy of
// another store's records can be written at revisions above the ones it
// had there: fences and versions keep growing across the copy. It writes a
// commit, which takes no revision of its own.
func (d *Driver) RaiseRevision(ctx context.Context, ns string, floor int64) error {
	_, err := d.submit(ctx, ns, &item{kind: kindFloor, floor: floor})
	return err
}

// Namespaces returns the namespaces that have a head in the store, sorted.
func (d *Driver) Namespaces(ctx context.Context) ([]string, error) {
	if err := backend.Ended(ctx); err != nil {
		return nil, err
	}
	var out []string
	prefix := d.opts.Prefix + "ns/"
	err := d.m.List(ctx, prefix, func(o ObjectInfo) bool {
		rest := strings.TrimPrefix(o.Key, prefix)
		name, file, ok := strings.Cut(rest, "/")
		if !ok || file != "head.json" {
			return true
		}
		if strings.HasPrefix(name, "~") {
			b, err := hex.DecodeString(name[1:])
			if err != nil {
				return true
			}
			name = string(b)
		}
		out = append(out, name)
		return true
	})
	if err != nil {
		return nil, d.closedErr(err)
	}
	slices.Sort(out)
	return out, nil
}
