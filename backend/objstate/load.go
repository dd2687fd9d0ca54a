package objstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// sync brings the cache up to the head: it reads the head unless its tag
// is the one last seen (a cheap request that answers "unchanged"), and
// applies what was committed since. It reports whether the head had
// changed, and, when one of the round's attempts (tries) turns out to be
// in the log, that attempt.
func (s *space) sync(ctx context.Context, tries map[string]*attempt) (changed bool, landed *attempt, err error) {
	for n := 0; ; n++ {
		start := time.Now()
		obj, err := s.d.read(ctx, s.headKey, s.tag)
		if err == nil || errors.Is(err, ErrUnchanged) || errors.Is(err, ErrNotExist) {
			s.readRTT = (3*s.readRTT + time.Since(start)) / 4
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrUnchanged):
			return false, nil, nil
		case errors.Is(err, ErrNotExist):
			if s.head != nil {
				return false, nil, fmt.Errorf("objstate: namespace %q: its head object %s is gone: was the store deleted?", s.ns, s.headKey)
			}
			if s.data == nil {
				s.dmu.Lock()
				s.data = newData()
				s.dmu.Unlock()
				return true, nil, nil
			}
			return false, nil, nil
		default:
			return false, nil, err
		}
		h, err := decodeHead(obj.Data)
		if err != nil {
			return false, nil, err
		}
		landed, err = s.catchUp(ctx, h, obj.Tag, tries)
		if errors.Is(err, ErrNotExist) && n < 8 {
			continue // an object the head named is gone: the head has moved on since
		}
		return true, landed, err
	}
}

// catchUp applies the commits of h that the cache lacks, from a snapshot
// when the cache is too far behind (or empty), and makes h current.
func (s *space) catchUp(ctx context.Context, h *head, tag string, tries map[string]*attempt) (*attempt, error) {
	var fresh *data
	from := int64(-1)
	if s.data != nil {
		from = s.data.pos
		if h.pos < from {
			return nil, fmt.Errorf("%w: namespace %q: the head is at commit %d, behind the %d already read: was the store replaced?",
				errFormat, s.ns, h.pos, from)
		}
	}
	if from < 0 || !h.holds(from+1) {
		if h.snap != nil {
			var err error
			if fresh, err = s.loadSnapshot(ctx, h.snap); err != nil {
				return nil, err
			}
		} else {
			fresh = newData()
		}
		from = fresh.pos
	}
	raws, err := s.commitsAfter(ctx, h, from)
	if err != nil {
		return nil, err
	}
	commits := make([]commit, len(raws))
	for i, raw := range raws {
		if commits[i], err = decodeCommit(raw); err != nil {
			return nil, err
		}
		if commits[i].pos != from+1+int64(i) {
			return nil, fmt.Errorf("%w: namespace %q: commit %d found where %d belongs", errFormat, s.ns, commits[i].pos, from+1+int64(i))
		}
	}
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if fresh != nil {
		s.data = fresh
	}
	for i := range commits {
		c := &commits[i]
		for k := range c.entries {
			apply(s.data, &c.entries[k])
		}
		s.data.noted(c.pos, c.id)
	}
	if rev, ev := s.data.rev, s.data.log.next()-1; rev != h.rev || ev != h.event {
		s.data, s.head, s.tag = nil, nil, ""
		return nil, fmt.Errorf("%w: namespace %q: replaying commits %d to %d (from a snapshot: %v) gives revision %d and event %d, the head says %d and %d",
			errFormat, s.ns, from+1, h.pos, fresh != nil, rev, ev, h.rev, h.event)
	}
	s.head, s.tag = h, tag
	return s.landed(tries)
}

// landed returns the attempt of tries whose commit is in the log, if any.
// An attempt at a position the cache has passed whose commit id it no
// longer remembers (a great many commits came between) cannot be told:
// its outcome is unknown.
func (s *space) landed(tries map[string]*attempt) (*attempt, error) {
	for _, a := range tries {
		id, ok := s.data.commitID(a.commit.pos)
		switch {
		case ok && id == a.commit.id:
			return a, nil
		case !ok && a.commit.pos <= s.data.pos:
			return nil, fmt.Errorf("%w: commit %d was overtaken by more than %d others before it could be checked", errOutcomeUnknown, a.commit.pos, recentIDs)
		}
	}
	return nil, nil
}

// holds reports whether the commits from pos on are all in h's segments
// and inline commits (pos beyond h.pos included).
func (h *head) holds(pos int64) bool {
	if pos > h.pos {
		return true
	}
	if len(h.segs) > 0 {
		return h.segs[0].From <= pos
	}
	return h.firstInline() <= pos
}

// commitsAfter returns h's commits after position from, fetching the
// segments that hold them (in parallel).
func (s *space) commitsAfter(ctx context.Context, h *head, from int64) ([]json.RawMessage, error) {
	var segs []segRef
	for _, sg := range h.segs {
		if sg.To > from {
			segs = append(segs, sg)
		}
	}
	held := make([][]json.RawMessage, len(segs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, sg := range segs {
		g.Go(func() error {
			obj, err := s.d.read(gctx, s.dir+sg.Key, "")
			if err != nil {
				return err
			}
			held[i], err = decodeSegment(obj.Data, sg)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out []json.RawMessage
	for i, sg := range segs {
		cs := held[i]
		if from >= sg.From {
			cs = cs[from-sg.From+1:]
		}
		out = append(out, cs...)
	}
	cs := h.commits
	if first := h.firstInline(); from >= first {
		cs = cs[from-first+1:]
	}
	return append(out, cs...), nil
}
