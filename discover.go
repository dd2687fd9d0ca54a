package state

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// probeLimit bounds how many index entries discovery reads from each
// candidate index to choose the one to walk, so that choosing costs the
// same at any size.
const probeLimit = 256

// ListRuns returns every run, newest first. It honours WithLimit (default
// 100, at most 1000) and WithCursor.
func (s *Store) ListRuns(ctx context.Context, opts ...ListOption) (RunPage, error) {
	o := collect(opts)
	p, err := s.discover(ctx, RunQuery{Limit: o.limit, Cursor: o.cursor})
	return p, wrap("workflow.list", "", err)
}

// DiscoverRuns returns the runs matching q, newest first.
//
// Discovery walks one index in order (of every run, of a status, of a tag
// or of the open runs), filtering what it reads, so its cost per page does
// not depend on how many runs the store holds. Claimable discovery walks
// an index of open runs, where a run keeps its place from creation until
// it finishes: a run that is claimable during the whole listing is on one
// of its pages, however it or other runs change status meanwhile. Other
// listings may miss, or repeat, a run that changes status while they page.
func (s *Store) DiscoverRuns(ctx context.Context, q RunQuery) (RunPage, error) {
	p, err := s.discover(ctx, q)
	return p, wrap("workflow.discover", "", err)
}

func (s *Store) discover(ctx context.Context, q RunQuery) (RunPage, error) {
	if q.Status != "" && !q.Status.Valid() {
		return RunPage{}, invalid("status", "must be one of %s; got %q", statusList(), q.Status)
	}
	if q.ParentID != "" {
		if err := s.checkRunID(q.ParentID); err != nil {
			return RunPage{}, invalid("parent_run_id", "%s", err.(*FieldError).Problem)
		}
	}
	if err := s.checkTags(q.Tags); err != nil {
		return RunPage{}, err
	}
	limit, err := pageLimit(q.Limit, DefaultRunLimit, MaxRunLimit)
	if err != nil {
		return RunPage{}, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return RunPage{}, err
	}
	if q.Claimable && q.Status.Finished() {
		return RunPage{Runs: []Run{}}, nil
	}
	done, err := s.enter()
	if err != nil {
		return RunPage{}, err
	}
	defer done()
	src, err := s.runSource(ctx, q.candidates(), after)
	if err != nil {
		return RunPage{}, err
	}
	page := RunPage{Runs: []Run{}}
	want, scanned := max(limit, 16), 0
	for len(page.Runs) < limit {
		if len(src.buf) == 0 {
			if src.done {
				break
			}
			if err := src.fill(ctx, s, want); err != nil {
				return RunPage{}, err
			}
			if len(src.buf) == 0 {
				break
			}
		}
		orders := src.buf[:min(len(src.buf), want)]
		src.buf = src.buf[len(orders):]
		ids := make([]string, len(orders))
		for i, o := range orders {
			ids[i] = layout.IDOf(o)
		}
		runs, err := s.loadRuns(ctx, ids)
		if err != nil {
			return RunPage{}, err
		}
		for i, r := range runs {
			if r == nil || !q.matches(r) {
				continue
			}
			page.Runs = append(page.Runs, *r)
			if len(page.Runs) == limit {
				page.NextCursor = encodeCursor(orders[i])
				break
			}
		}
		// Read further ahead by what the runs read so far say it takes to
		// fill the page.
		scanned += len(orders)
		if left := limit - len(page.Runs); left > 0 {
			want = min(max(left*scanned/max(len(page.Runs), 1)+left, 16), MaxRunLimit)
		}
	}
	return page, nil
}

func (q *RunQuery) matches(r *Run) bool {
	if q.Status != "" && r.Status != q.Status {
		return false
	}
	if q.Claimable && !r.Claimable {
		return false
	}
	if q.ParentID != "" && r.ParentID != q.ParentID {
		return false
	}
	for k, v := range q.Tags {
		if tv, ok := r.Tags[k]; !ok || tv != v {
			return false
		}
	}
	return true
}

// candidates returns the prefixes of the indexes that each list every run
// q matches (and others, which discovery filters out).
func (q *RunQuery) candidates() []string {
	var out []string
	tags := slices.Sorted(maps.Keys(q.Tags))
	open := q.Claimable || (q.Status != "" && !q.Status.Finished())
	switch {
	case q.Claimable: // the open indexes only: a claimable run never moves in them
		if len(tags) == 0 && q.ParentID == "" {
			out = append(out, layout.IndexOpen)
		}
	case q.Status != "":
		out = append(out, layout.StatusIndex(layout.StatusBucket(string(q.Status))))
	case len(tags) == 0 && q.ParentID == "":
		out = append(out, layout.IndexAll)
	}
	if q.ParentID != "" {
		if open {
			out = append(out, layout.OpenChildIndex(q.ParentID))
		} else {
			out = append(out, layout.ChildIndex(q.ParentID))
		}
	}
	for _, k := range tags {
		if open {
			out = append(out, layout.OpenTagIndex(k, q.Tags[k]))
		} else {
			out = append(out, layout.TagIndex(k, q.Tags[k]))
		}
	}
	return out
}

// indexSource is the index a discovery walks, after the cursor.
type indexSource struct {
	prefix string
	after  string   // the last suffix read
	buf    []string // suffixes read but not yet consumed
	done   bool     // the index holds nothing after buf
}

// fill reads up to n more suffixes.
func (src *indexSource) fill(ctx context.Context, s *Store, n int) error {
	_, now := s.now()
	q := &backend.ListQuery{NS: s.ns, Prefix: src.prefix, Limit: n, Now: now, KeysOnly: true}
	if src.after != "" {
		q.After = src.prefix + src.after
	}
	recs, err := s.c.drv.List(ctx, q)
	if err != nil {
		return err
	}
	for _, r := range recs {
		src.buf = append(src.buf, r.Key[len(src.prefix):])
	}
	if len(src.buf) > 0 {
		src.after = src.buf[len(src.buf)-1]
	}
	src.done = len(recs) < n
	return nil
}

// runSource picks the index to walk among candidates. With one candidate
// there is nothing to choose. With several, it reads up to probeLimit
// entries of each and walks the one that ran out first (the smallest),
// starting with what it read; when none ran out, any of them will do and
// the first is taken. No index is counted whole.
func (s *Store) runSource(ctx context.Context, candidates []string, after string) (*indexSource, error) {
	if len(candidates) == 1 {
		return &indexSource{prefix: candidates[0], after: after}, nil
	}
	var best *indexSource
	for _, p := range candidates {
		src := &indexSource{prefix: p, after: after}
		if err := src.fill(ctx, s, probeLimit); err != nil {
			return nil, err
		}
		if best == nil || (src.done && (!best.done || len(src.buf) < len(best.buf))) {
			best = src
		}
		if best.done && len(best.buf) == 0 {
			break // nothing matches
		}
	}
	return best, nil
}

// statusList names every status, for messages.
func statusList() string {
	names := make([]string, len(Statuses))
	for i, st := range Statuses {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}
