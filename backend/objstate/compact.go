package objstate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Compaction bounds what a reader replays and what a head names. It runs
// in the background, one job at a time per namespace, started by the
// leader after a commit when the head calls for one:
//
//   - a snapshot, when the log since the last one (segments and the head's
//     commits) reaches half the last snapshot's size, or
//     Options.SnapshotMinBytes: the leader freezes the cache (a
//     copy-on-write clone, at once), a goroutine writes it, and the
//     leader then makes the head name it instead of the segments it
//     covers, by a head write like a commit's (which loses no commit: the
//     snapshot is of a commit the head already holds, and what came after
//     stays named);
//   - a merge, when the head names MaxSegments segments of one level in a
//     row at its end: a goroutine reads them and writes their commits as
//     one segment of the next level, which the leader then names instead.
//
// The objects the new head no longer names are deleted at once: no head
// will name them again, since every head is written conditioned on the one
// before it. A reader that was about to fetch one finds it gone and reads
// the head again.

// compactTimeout bounds one compaction job.
const compactTimeout = 10 * time.Minute

// mergeOp is a merge to apply to the head: seg replaces the run of
// segments replaced.
type mergeOp struct {
	seg      segRef
	replaced []string
	started  time.Time
}

// maybeCompact starts a compaction job if the head calls for one; the
// leader holds the write lock.
func (s *space) maybeCompact() {
	h := s.head
	if h == nil || s.compacting.Load() {
		return
	}
	logBytes := h.segBytes() + int64(h.inlineBytes())
	var snapBytes int64
	if h.snap != nil {
		snapBytes = h.snap.Bytes
	}
	var job func()
	switch run := h.mergeable(s.d.opts.MaxSegments); {
	case logBytes >= max(int64(s.d.opts.SnapshotMinBytes), snapBytes/2):
		f := s.data.freeze()
		job = func() { s.compact(f) }
	case run != nil:
		job = func() { s.merge(run) }
	default:
		return
	}
	s.compacting.Store(true)
	s.d.jobBegan()
	if !s.d.start(func() { defer s.d.jobEnded(); defer s.compacting.Store(false); job() }) {
		s.compacting.Store(false)
		s.d.jobEnded()
	}
}

func (d *Driver) jobBegan() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.jobs == 0 {
		d.idle = make(chan struct{})
	}
	d.jobs++
}

func (d *Driver) jobEnded() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.jobs--
	if d.jobs == 0 {
		close(d.idle)
	}
}

// WaitCompactions waits until no compaction job (a snapshot being written,
// segments being merged) runs in any namespace of the driver, or ctx ends.
// A bulk load leaves such jobs behind it, which load the medium (a
// snapshot of a million records is some 360 MB) and slow the writes that
// share it; a benchmark or a migration that wants to measure or hand over
// a settled store waits for them. Jobs start again with later commits.
func (d *Driver) WaitCompactions(ctx context.Context) error {
	d.mu.Lock()
	idle, running := d.idle, d.jobs > 0
	d.mu.Unlock()
	if !running {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// compact writes f as a snapshot and has the head name it.
func (s *space) compact(f *frozen) {
	ctx, cancel := context.WithTimeout(s.d.life, compactTimeout)
	defer cancel()
	ref, err := s.writeSnapshot(ctx, f)
	if err != nil {
		return // the parts written are orphans, swept later
	}
	out, err := s.submit(ctx, &item{kind: kindSnapshot, snap: ref})
	switch {
	case err != nil:
	case out.applied:
		s.deleteAll(ctx, out.dropped)
	default:
		s.deleteAll(ctx, ref.Parts) // a newer snapshot got there first
	}
}

// mergeable returns the run of max segments of one level at the end of
// h's segments, if there is one.
func (h *head) mergeable(max int) []segRef {
	n := len(h.segs)
	if max < 2 || n < max {
		return nil
	}
	run := h.segs[n-max:]
	for _, sg := range run {
		if sg.Level != run[0].Level {
			return nil
		}
	}
	return slices.Clone(run)
}

// merge writes the commits of run as one segment and has the head name it
// instead.
func (s *space) merge(run []segRef) {
	ctx, cancel := context.WithTimeout(s.d.life, compactTimeout)
	defer cancel()
	started := time.Now()
	var commits []json.RawMessage
	for _, sg := range run {
		obj, err := s.d.read(ctx, s.dir+sg.Key, "")
		if err != nil {
			return // gone (a snapshot took it) or unreadable now: the next commit tries again
		}
		cs, err := decodeSegment(obj.Data, sg)
		if err != nil {
			return
		}
		commits = append(commits, cs...)
	}
	op := &mergeOp{seg: segRef{From: run[0].From, To: run[len(run)-1].To, Level: run[0].Level + 1}, started: started}
	op.seg.Key = fmt.Sprintf("seg/%012d-%012d-%s.json", op.seg.From, op.seg.To, newID()[:8])
	b := encodeSegment(op.seg.From, op.seg.To, commits)
	op.seg.Bytes = int64(len(b))
	for _, sg := range run {
		op.replaced = append(op.replaced, sg.Key)
	}
	if _, err := s.d.write(ctx, s.dir+op.seg.Key, b, Cond{}); err != nil {
		return
	}
	out, err := s.submit(ctx, &item{kind: kindMerge, merge: op})
	switch {
	case err != nil:
	case out.applied:
		s.deleteAll(ctx, out.dropped)
	default:
		s.deleteAll(ctx, []string{op.seg.Key})
	}
}

// holdsRun reports whether h names the segments keys, in a row.
func (h *head) holdsRun(keys []string) bool {
	for i, sg := range h.segs {
		if sg.Key == keys[0] {
			if len(h.segs)-i < len(keys) {
				return false
			}
			for k, key := range keys {
				if h.segs[i+k].Key != key {
					return false
				}
			}
			return true
		}
	}
	return false
}

// replaceRun makes h name m.seg instead of the run it replaces (which h
// holds) and returns the keys it no longer names.
func (h *head) replaceRun(m *mergeOp) []string {
	for i, sg := range h.segs {
		if sg.Key == m.replaced[0] {
			segs := append(slices.Clone(h.segs[:i]), m.seg)
			h.segs = append(segs, h.segs[i+len(m.replaced):]...)
			return m.replaced
		}
	}
	return nil
}

func (s *space) deleteAll(ctx context.Context, keys []string) {
	for _, k := range keys {
		if err := s.d.del(ctx, s.dir+k); err != nil && ctx.Err() != nil {
			return
		}
	}
}

// sweepOrphans deletes, at most limit of, the segments and snapshot parts
// of the namespace that its head (as last read) does not name and that
// are older than OrphanGrace: those a writer wrote before it crashed or
// lost the race to write the head. It lists the namespace at most once
// per OrphanGrace/4. Only the leader calls it.
func (s *space) sweepOrphans(ctx context.Context, limit int) (int64, error) {
	if s.head == nil || time.Since(s.lastOrphanSweep) < s.d.opts.OrphanGrace/4 {
		return 0, nil
	}
	named := map[string]bool{}
	if s.head.snap != nil {
		for _, p := range s.head.snap.Parts {
			named[p] = true
		}
	}
	for _, sg := range s.head.segs {
		named[sg.Key] = true
	}
	cutoff := s.d.m.Now().Add(-s.d.opts.OrphanGrace)
	var dead []string
	full := false
	for _, sub := range []string{"seg/", "snap/"} {
		prefix := s.d.opts.Prefix + s.dir + sub
		err := s.d.m.List(ctx, prefix, func(o ObjectInfo) bool {
			key := strings.TrimPrefix(o.Key, s.d.opts.Prefix+s.dir)
			if !named[key] && o.Modified.Before(cutoff) {
				if len(dead) == limit {
					full = true
					return false
				}
				dead = append(dead, key)
			}
			return true
		})
		if err != nil {
			return 0, err
		}
	}
	if !full {
		s.lastOrphanSweep = time.Now()
	}
	s.deleteAll(ctx, dead)
	return int64(len(dead)), nil
}
