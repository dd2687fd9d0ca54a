package objstate

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state/backend"
)

// space is one namespace: its cached data, as of the head last read or
// written, and the queue of calls waiting for its leader. The leader is a
// goroutine that runs while calls wait: it takes every call queued, turns
// them into one commit (group commit) written by one conditional write of
// the head, or, for reads, checks once that the cache is current.
type space struct {
	d       *Driver
	ns      string
	dir     string // key prefix of the namespace's objects
	headKey string

	// mu guards the queue.
	mu      sync.Mutex
	queue   []*item
	next    *round // the round that readers arriving now wait for
	leading bool
	// Read checks (check.go).
	checking int    // checks in flight
	waiting  *round // readers waiting for the next check to start
	// lastReaders is the number of reads the last read check served.
	lastReaders int

	// dmu guards what follows; only the leader writes it.
	dmu  sync.RWMutex
	data *data // nil until loaded
	head *head // the head as last read or written; nil while absent
	tag  string

	// Leader-only state.
	compacting      atomic.Bool // a compaction runs
	lastOrphanSweep time.Time
	readRTT         time.Duration // of reading the head, averaged
	wrote           bool          // the last round wrote the head
}

func newSpace(d *Driver, ns string) *space {
	dir := nsDir(ns)
	return &space{d: d, ns: ns, dir: dir, headKey: dir + "head.json"}
}

func (s *space) lock()   { s.mu.Lock() }
func (s *space) unlock() { s.mu.Unlock() }

// round is one turn of the leader; readers wait for the first round that
// starts after they arrive, which brings the cache up to the head as it
// was when the round began, or later.
type round struct {
	done    chan struct{}
	err     error
	readers int // reads waiting for it, for a read check
}

type itemKind uint8

const (
	kindTxn itemKind = iota + 1
	kindUpdate
	kindReset
	kindSweep
	kindTrim
	kindSnapshot
	kindFloor
	kindMerge
)

// item is a call waiting for a group commit.
type item struct {
	kind     itemKind
	txn      *backend.Txn
	q        *backend.GetQuery
	fn       func([]backend.Record, time.Time) (*backend.Txn, error)
	resetQ   *backend.ResetQuery
	sweepQ   *backend.SweepQuery
	trimQ    *backend.TrimQuery
	snap     *snapRef
	merge    *mergeOp
	floor    int64
	deadline time.Time
	taken    bool // a round took it (guarded by space.mu)

	done chan struct{}
	out  outcome
}

// heavy reports whether the item reads the whole namespace to decide what
// to write (counting, sweeping, trimming): it goes first in its group, so
// that it reads the data itself and not an overlay.
func (it *item) heavy() bool {
	return it.kind == kindReset || it.kind == kindSweep || it.kind == kindTrim
}

// outcome is what a call learns.
type outcome struct {
	res   backend.Result
	reset backend.ResetResult
	sweep backend.SweepResult
	trim  backend.TrimResult
	err   error
	// applied is set when a compaction's snapshot is named by the head,
	// and dropped lists the objects that head no longer names.
	applied bool
	dropped []string
}

// submit queues it and waits for its outcome or ctx's end. A call whose
// context ends before a round took it is withdrawn and changes nothing;
// once taken, its outcome is unknown to the caller.
func (s *space) submit(ctx context.Context, it *item) (outcome, error) {
	if dl, ok := ctx.Deadline(); ok {
		it.deadline = dl
	}
	it.done = make(chan struct{})
	s.lock()
	s.queue = append(s.queue, it)
	err := s.lead()
	s.unlock()
	if err != nil {
		return outcome{}, err
	}
	select {
	case <-it.done:
		return it.out, it.out.err
	case <-ctx.Done():
		s.lock()
		if !it.taken {
			for i, q := range s.queue {
				if q == it {
					s.queue = append(s.queue[:i], s.queue[i+1:]...)
					break
				}
			}
			s.unlock()
			return outcome{}, ctx.Err()
		}
		s.unlock()
		return outcome{}, ctx.Err()
	}
}

// current waits until the cache is as current as the head was at some
// moment after the call began, and returns the data under the read lock;
// the caller calls release when done reading. It takes a read check
// (check.go) and, when that cannot tell (the head moved, the cache is not
// loaded, the request failed), the leader's next round, which brings the
// cache up to the head.
func (s *space) current(ctx context.Context) (d *data, release func(), err error) {
	if r, err := s.awaitCheck(ctx); err != nil || r.err == nil {
		if err == nil {
			s.dmu.RLock()
			if s.data != nil {
				return s.data, s.dmu.RUnlock, nil
			}
			s.dmu.RUnlock() // the leader dropped the cache meanwhile
		} else {
			return nil, nil, err
		}
	}
	s.lock()
	if s.next == nil {
		s.next = &round{done: make(chan struct{})}
	}
	r := s.next
	err = s.lead()
	s.unlock()
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-r.done:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	s.dmu.RLock()
	return s.data, s.dmu.RUnlock, nil
}

// lead starts the leader unless it runs; s.mu is held.
func (s *space) lead() error {
	if s.leading {
		return nil
	}
	if !s.d.start(s.run) {
		return backend.ErrClosed
	}
	s.leading = true
	return nil
}

// run is the leader: it runs rounds while calls wait.
func (s *space) run() {
	var carry []*item
	for {
		s.lock()
		backlog := len(s.queue) > 0
		s.unlock()
		if s.wrote && backlog && len(carry) == 0 {
			// The last round wrote the head and more calls queued up
			// meanwhile: let another process's writer have a turn.
			s.yield()
		}
		s.wrote = false
		s.lock()
		items := append(carry, s.queue...)
		s.queue = nil
		r := s.next
		s.next = nil
		if len(items) == 0 && r == nil {
			s.leading = false
			s.unlock()
			return
		}
		for _, it := range items {
			it.taken = true
		}
		s.unlock()
		var group []*item
		group, carry = split(items, s.d.opts.MaxGroup)
		err := s.d.life.Err()
		if err == nil {
			ctx, cancel := s.roundContext(group)
			err = s.round(ctx, group)
			if err == nil && len(group) == 1 && group[0].kind == kindSweep {
				_, _ = s.sweepOrphans(ctx, group[0].sweepQ.Limit) // best effort: the next sweep tries again
			}
			cancel()
		}
		err = s.d.closedErr(err)
		if err != nil && len(carry) > 0 && s.d.life.Err() != nil {
			group, carry = append(group, carry...), nil
		}
		if r != nil {
			r.err = err
			close(r.done)
		}
		for _, it := range group {
			if it.out.err == nil && err != nil {
				it.out.err = err
			}
			close(it.done)
		}
	}
}

// yield pauses the leader for about one and a half reads of the head, a
// little jittered. A process that lost the race to write the head must
// read it again before it can try again, while the winner, with calls
// queued, could write at once and, under load, win every time: the pause
// gives the loser its turn. A process alone loses little: the calls that
// queue meanwhile go into the next commit.
func (s *space) yield() {
	d := min(s.readRTT*3/2+rand.N(s.readRTT/2+1), maxYield)
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.d.life.Done():
	}
}

// maxYield bounds yield.
const maxYield = 50 * time.Millisecond

// split returns the first group of items to commit together (at most max,
// a heavy item only first) and the rest.
func split(items []*item, max int) (group, rest []*item) {
	n := 0
	for n < len(items) && n < max && (n == 0 || !items[n].heavy()) {
		n++
		if items[n-1].heavy() {
			break
		}
	}
	if n == len(items) {
		return items, nil
	}
	return items[:n:n], append([]*item(nil), items[n:]...)
}

// roundContext bounds a round by the latest deadline of its calls, or
// CommitTimeout when one has none.
func (s *space) roundContext(group []*item) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, it := range group {
		if it.deadline.IsZero() {
			latest = time.Time{}
			break
		}
		if it.deadline.After(latest) {
			latest = it.deadline
		}
	}
	limit := time.Now().Add(s.d.opts.CommitTimeout)
	if latest.IsZero() || latest.After(limit) {
		latest = limit
	}
	return context.WithDeadline(s.d.life, latest)
}
