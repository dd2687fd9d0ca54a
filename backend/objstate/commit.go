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
	merge      *mergeOp
	dropped    []string // objects the new head no longer names
	rev, event int64    // counters after the commit
}

// round commits group, or, when it is empty, brings the cache up to the
// head. It tries until it succeeds or ctx ends: a lost race (another
// process wrote the head first) reads the new head and builds the group
// again on it. A write whose answer was lost may have landed: the round
// then reads the head until it knows (its commit's id at the position it
// wrote, another commit there, or the head unchanged, when it sends the
// very same write again), and never builds the group again while such a
// write is pending. So the commit that lands is always the last one built,
// and an Update function's last call is the one whose Txn was committed.
func (s *space) round(ctx context.Context, group []*item) error {
	var lastErr error
	fails := 0 // transient failures in a row, for the pause before the next try
	retry := func(err error) bool {
		lastErr = err
		if !errors.Is(err, ErrTransient) && !errors.Is(err, ErrNotExist) {
			return false
		}
		s.pause(ctx, fails)
		fails++
		return ctx.Err() == nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return s.giveUp(err, false, lastErr)
		}
		if s.data == nil || len(group) == 0 {
			if _, _, err := s.sync(ctx, nil); err != nil {
				if retry(err) {
					continue
				}
				return s.giveUp(err, false, lastErr)
			}
			fails = 0
			if len(group) == 0 {
				return nil
			}
		}
		a := s.build(group)
		if a.commit == nil && a.snap == nil && a.merge == nil {
			// Nothing to write: the outcomes hold if the head has not
			// moved since the cache was last known current.
			changed, _, err := s.sync(ctx, nil)
			switch {
			case err != nil:
				if retry(err) {
					continue
				}
				return s.giveUp(err, false, lastErr)
			case !changed:
				s.finish(group, a)
				return nil
			}
			fails = 0
			continue
		}
		h, err := s.nextHead(ctx, a)
		if err != nil {
			if retry(err) {
				continue
			}
			return s.giveUp(err, false, lastErr)
		}
		done, pending, err := s.writeHead(ctx, h, a, retry)
		if err != nil {
			return s.giveUp(err, pending, lastErr)
		}
		if done {
			s.finish(group, a)
			return nil
		}
		// Another commit took the position: build again on it.
	}
}

// writeHead writes h, the head that commits a, conditioned on the head
// the cache is at, and reports whether a landed. When the answer is lost
// it reads the head until it knows: a landed (its commit is there), or
// another commit took its place (a cannot land any more: false), or the
// head did not move, when it sends the same write again. It returns an
// error only when it gives up, saying whether a may have landed (pending).
func (s *space) writeHead(ctx context.Context, h *head, a *attempt, retry func(error) bool) (done, pending bool, err error) {
	body := h.encode(s.ns)
	cond := Cond{IfMatch: s.tag}
	if s.head == nil {
		cond = Cond{IfAbsent: true}
	}
	tries := map[string]*attempt{}
	if a.commit != nil {
		tries[a.commit.id] = a
	}
	for {
		tag, err := s.d.write(ctx, s.headKey, body, cond)
		switch {
		case err == nil:
			s.wrote = true
			s.install(h, tag, a)
			return true, false, nil
		case errors.Is(err, ErrTransient):
			pending = pending || a.commit != nil
			if !retry(err) {
				return false, pending, err
			}
		case !errors.Is(err, ErrConditionFailed):
			return false, pending, err // this one not written
		}
		// Read the head until it says what became of the write.
		changed, landed, err := s.sync(ctx, tries)
		for err != nil {
			if !retry(err) {
				return false, pending, err
			}
			changed, landed, err = s.sync(ctx, tries)
		}
		switch {
		case landed != nil:
			return true, false, nil
		case changed:
			return false, false, nil
		}
		// The head did not move: send the same write again.
	}
}

// giveUp returns the error of a round that failed; pending says a write
// of it may have landed, which makes its outcome unknown.
func (s *space) giveUp(err error, pending bool, last error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		if last != nil && last != err {
			err = fmt.Errorf("%w (last error: %w)", err, last)
		}
	}
	if pending {
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

// pause waits before a retry after n transient failures in a row: a few
// ms growing to a second, jittered.
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

// finish gives every call of the group its outcome from a.
func (s *space) finish(group []*item, a *attempt) {
	for i, it := range group {
		it.out = a.outs[i]
		if it.kind == kindSnapshot && a.snap != nil && a.snap == it.snap ||
			it.kind == kindMerge && a.merge != nil && a.merge == it.merge {
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
	if a.merge != nil && time.Since(a.merge.started) > s.d.opts.OrphanGrace/2 {
		a.merge = nil
	}
	if a.merge != nil && h.holdsRun(a.merge.replaced) {
		a.dropped = append(a.dropped, h.replaceRun(a.merge)...)
	} else {
		a.merge = nil // a snapshot in the same commit took the run
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
