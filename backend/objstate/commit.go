package objstate

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// attempt is one try at writing a group: the commit (nil when the group
// writes nothing), a compaction to apply to the head, and what each call
// learns if it lands.
type attempt struct {
	outs       []outcome
	commit     *commit
	raw        []byte // commit, encoded
	snap       *snapRef
	dropped    []string // objects the new head no longer names
	rev, event int64    // counters after the commit
}

// round commits group, or, when it is empty, brings the cache up to the
// head. It tries until it succeeds or ctx ends: a lost race (another
// process wrote the head first) reads the new head and builds the group
// again on it; a write whose outcome it did not learn is recognised by its
// commit's id when the head is read next.
func (s *space) round(ctx context.Context, group []*item) error {
	tries := map[string]*attempt{}
	var lastErr error
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return s.giveUp(err, tries, lastErr)
		}
		if s.data == nil || len(group) == 0 {
			changed, landed, err := s.sync(ctx, tries)
			if err != nil {
				lastErr = err
				if s.retryable(ctx, err, n) {
					continue
				}
				return s.giveUp(err, tries, lastErr)
			}
			if landed != nil {
				s.finish(group, landed)
				return nil
			}
			if len(group) == 0 {
				return nil
			}
			_ = changed
		}
		a := s.build(group)
		if a.commit == nil && a.snap == nil {
			// Nothing to write: the outcomes hold if the head has not
			// moved since the cache was last known current.
			changed, landed, err := s.sync(ctx, tries)
			switch {
			case err != nil:
				lastErr = err
				if s.retryable(ctx, err, n) {
					continue
				}
				return s.giveUp(err, tries, lastErr)
			case landed != nil:
				s.finish(group, landed)
				return nil
			case !changed:
				s.finish(group, a)
				return nil
			}
			continue
		}
		h, err := s.nextHead(ctx, a)
		if err != nil {
			lastErr = err
			if s.retryable(ctx, err, n) {
				continue
			}
			return s.giveUp(err, tries, lastErr)
		}
		if a.commit != nil {
			tries[a.commit.id] = a
		}
		cond := Cond{IfMatch: s.tag}
		if s.head == nil {
			cond = Cond{IfAbsent: true}
		}
		tag, err := s.d.write(ctx, s.headKey, h.encode(s.ns), cond)
		if err == nil {
			s.wrote = true
			s.install(h, tag, a)
			s.finish(group, a)
			return nil
		}
		if !errors.Is(err, ErrConditionFailed) {
			if !errors.Is(err, ErrTransient) {
				if a.commit != nil {
					delete(tries, a.commit.id) // it did not happen
				}
				return s.giveUp(err, tries, err)
			}
			lastErr = err
			s.pause(ctx, n)
		}
		// Another writer got there first, or the write's outcome is
		// unknown: read the head; it tells which.
		_, landed, err := s.sync(ctx, tries)
		if landed != nil {
			s.finish(group, landed)
			return nil
		}
		if err != nil {
			lastErr = err
			if !s.retryable(ctx, err, n) {
				return s.giveUp(err, tries, lastErr)
			}
		}
	}
}

// retryable reports whether a failed step may be tried again, after a
// pause.
func (s *space) retryable(ctx context.Context, err error, n int) bool {
	if !errors.Is(err, ErrTransient) && !errors.Is(err, ErrNotExist) {
		return false
	}
	s.pause(ctx, n)
	return ctx.Err() == nil
}

// pause waits before the n-th retry: a few ms growing to a second, jittered.
func (s *space) pause(ctx context.Context, n int) {
	d := min(time.Duration(1<<min(n, 10))*5*time.Millisecond, time.Second)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// giveUp returns the error of a round that failed: when a write of it may
// have landed, its outcome is unknown.
func (s *space) giveUp(err error, tries map[string]*attempt, last error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if last != nil {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
	}
	if len(tries) > 0 {
		// The cache may now be behind a commit of ours: read it afresh.
		s.dmu.Lock()
		s.data, s.head, s.tag = nil, nil, ""
		s.dmu.Unlock()
		if !errors.Is(err, errOutcomeUnknown) {
			err = fmt.Errorf("%w: %w", errOutcomeUnknown, err)
		}
	}
	return err
}

// finish gives every call of the group its outcome from a.
func (s *space) finish(group []*item, a *attempt) {
	for i, it := range group {
		it.out = a.outs[i]
		if it.kind == kindSnapshot && a.snap != nil && a.snap == it.snap {
			it.out.applied = true
			it.out.dropped = a.dropped
		}
	}
}

// nextHead returns the head that commits a: the current one with a's
// compaction applied and a's commit added. When the head's commits would
// grow beyond TailBytes, it first writes them to a segment object.
func (s *space) nextHead(ctx context.Context, a *attempt) (*head, error) {
	h := &head{}
	if s.head != nil {
		*h = *s.head
		h.segs = slices.Clone(h.segs)
		h.commits = slices.Clone(h.commits)
	}
	a.dropped = nil
	if a.snap != nil && time.Since(a.snap.started) > s.d.opts.OrphanGrace/2 {
		// A sweep may count its parts as orphans by now: never name it.
		a.snap = nil
	}
	if a.snap != nil {
		a.dropped = h.compact(a.snap)
	}
	if a.commit == nil {
		return h, nil
	}
	if len(h.commits) > 0 && h.inlineBytes()+len(a.raw) > s.d.opts.TailBytes {
		seg := segRef{From: h.firstInline(), To: h.pos}
		seg.Key = fmt.Sprintf("seg/%012d-%012d-%s.json", seg.From, seg.To, newID()[:8])
		b := encodeSegment(seg.From, seg.To, h.commits)
		seg.Bytes = int64(len(b))
		if _, err := s.d.write(ctx, s.dir+seg.Key, b, Cond{}); err != nil {
			return nil, err
		}
		h.segs = append(h.segs, seg)
		h.commits = nil
	}
	h.commits = append(h.commits, a.raw)
	h.pos, h.rev, h.event = a.commit.pos, a.rev, a.event
	return h, nil
}

// compact makes h name the snapshot ref instead of the segments and
// commits it holds, and returns the keys of the objects h no longer names.
func (h *head) compact(ref *snapRef) (dropped []string) {
	if h.snap != nil {
		dropped = append(dropped, h.snap.Parts...)
	}
	h.snap = ref
	keep := []segRef{}
	for _, sg := range h.segs {
		if sg.To <= ref.Pos {
			dropped = append(dropped, sg.Key)
		} else {
			keep = append(keep, sg)
		}
	}
	h.segs = keep
	if len(h.segs) == 0 {
		if n := ref.Pos - h.firstInline() + 1; n > 0 {
			h.commits = h.commits[n:]
		}
	}
	return dropped
}

// install makes the head written by a the current one and applies a's
// commit to the cache.
func (s *space) install(h *head, tag string, a *attempt) {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if a.commit != nil {
		for i := range a.commit.entries {
			apply(s.data, &a.commit.entries[i])
		}
		s.data.noted(a.commit.pos, a.commit.id)
	}
	s.head, s.tag = h, tag
	s.maybeCompact()
}
