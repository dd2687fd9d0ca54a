package objstate

import (
	"context"
	"strings"
	"time"
)

// Compaction bounds what a reader replays: when a head names MaxSegments
// segments, or more bytes of segments than its snapshot holds (and at
// least minCompactBytes), the leader freezes the cache (a copy-on-write
// clone, at once) and a goroutine writes it as a new snapshot, then asks
// the leader to make the head name it instead of the segments it covers
// (a head write like any commit's, which loses no commit: the snapshot is
// of a commit the head already holds, and what came after stays named).
// The objects the head no longer names are deleted at once: no head will
// name them again, since every head is written conditioned on the one
// before it. A reader that was about to fetch one finds it gone and reads
// the head again.

// minCompactBytes is the least log that makes a snapshot worth writing.
const minCompactBytes = 1 << 20

// compactTimeout bounds writing one snapshot.
const compactTimeout = 10 * time.Minute

// maybeCompact starts a compaction if the head calls for one; the leader
// holds the write lock.
func (s *space) maybeCompact() {
	h := s.head
	if h == nil || s.compacting.Load() {
		return
	}
	logBytes := h.segBytes()
	var snapBytes int64
	if h.snap != nil {
		snapBytes = h.snap.Bytes
	}
	if len(h.segs) < s.d.opts.MaxSegments && (logBytes < minCompactBytes || logBytes < snapBytes) {
		return
	}
	f := s.data.freeze()
	s.compacting.Store(true)
	if !s.d.start(func() { s.compact(f) }) {
		s.compacting.Store(false)
	}
}

// compact writes f as a snapshot and has the head name it.
func (s *space) compact(f *frozen) {
	defer s.compacting.Store(false)
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
