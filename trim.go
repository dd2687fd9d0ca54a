package state

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state/backend"
)

// History is kept within Options.HistoryMaxEvents as it is written, not only
// when the sweeper runs: the store counts the events each namespace appends
// and, every trimEvery of them, has the driver remove the oldest beyond the
// limit (backend.HistoryTrimmer) in one bounded call. The write that crosses
// the mark pays for that call; the others pay for an atomic add. So history
// stays within trimEvery events of its limit (per process writing to the
// namespace) and trimming costs a constant per write, amortised.

// trimEvery is how many events a namespace appends between trims, for a
// limit of limit events: a sixty-fourth of it, from 8 to sweepBatch.
func trimEvery(limit int64) int64 { return min(max(limit/64, 8), sweepBatch) }

// trimCounter counts one namespace's events since its last trim.
type trimCounter struct{ n atomic.Int64 }

// trimmer holds the counters of a store's namespaces.
type trimmer struct {
	g        *gate // whose driver can trim, or nil
	keep     int64 // Options.HistoryMaxEvents; 0: no limit
	every    int64
	counters sync.Map // namespace → *trimCounter
	logf     func(msg string, args ...any)
	// notify, if set, is told the namespace of every write that appended
	// events, so that its waiters wake at once.
	notify func(ns string)
}

// newTrimmer returns the trimmer of a store over g; it trims only when g's
// driver can (backend.HistoryTrimmer) and history has a limit.
func newTrimmer(g *gate, o Options) *trimmer {
	t := &trimmer{logf: o.Logger.Warn}
	if g.trimmer != nil && o.HistoryMaxEvents > 0 {
		t.g = g
		t.keep, t.every = o.HistoryMaxEvents, trimEvery(o.HistoryMaxEvents)
	}
	return t
}

// appended records that n events were appended to namespace ns and trims
// the namespace when it is due. A failed trim is logged, not returned: the
// write it follows has succeeded, and the next write tries again.
func (t *trimmer) appended(ctx context.Context, ns string, n int) {
	if t.notify != nil && n > 0 {
		t.notify(ns)
	}
	if t.keep == 0 || n <= 0 {
		return
	}
	v, ok := t.counters.Load(ns)
	if !ok {
		v, _ = t.counters.LoadOrStore(ns, new(trimCounter))
	}
	c := v.(*trimCounter)
	if c.n.Add(int64(n)) < t.every {
		return
	}
	// Whoever takes the count trims; writers that come after count anew
	// and trim too if they reach the mark meanwhile, so a trim that stalls
	// (a descheduled goroutine, a slow round trip) holds no one up.
	got := c.n.Swap(0)
	if got < t.every {
		c.n.Add(got) // another writer took the count first
		return
	}
	res, err := t.g.TrimHistory(ctx, &backend.TrimQuery{NS: ns, Keep: t.keep, Limit: int(2 * t.every)})
	if err != nil || res.More {
		c.n.Add(t.every) // not done: the next write tries again
	}
	if err != nil && ctx.Err() == nil {
		t.logf("state: trimming history", "namespace", ns, "err", err)
	}
}

// trimMargin is how many events older than TrimHistory's bound it leaves,
// at most, so that events appended by other writers while it trims are
// never among those it removes (see TrimHistory).
const trimMargin = 64

// TrimHistory removes the history entries of the store's namespace that
// were recorded before before, oldest first, in bounded calls, and returns
// how many it removed. The newest entry always stays, and so may up to 64
// entries just older than before: the driver removes the oldest entries
// beyond a count (backend.HistoryTrimmer), and TrimHistory keeps that many
// more than it found younger, so that an entry appended meanwhile by
// another writer never pushes a young one out. It finds the first young
// entry with a binary search over ids (a few dozen reads of one entry);
// on a driver whose ids have gaps (PostgreSQL) it then counts the older
// entries by reading them, a page of a thousand at a time, and takes them
// from the namespace's count. A backend that cannot trim removes nothing.
//
// History is otherwise kept by the store-wide retention
// (Options.HistoryMaxAge, HistoryMaxEvents); TrimHistory serves a namespace
// whose history should go sooner, such as the records of tasks that have
// expired (package mcptasks). Waiters (Watch, WaitKey) notice removed
// entries and check what they wait for again.
func (s *Store) TrimHistory(ctx context.Context, before time.Time) (int64, error) {
	n, err := s.trimHistory(ctx, before)
	return n, wrap("history.trim", "", err)
}

func (s *Store) trimHistory(ctx context.Context, before time.Time) (int64, error) {
	if s.c.drv.trimmer == nil {
		return 0, nil
	}
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	newest := func() (backend.Event, bool, error) {
		evs, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Limit: 1})
		if err != nil || len(evs) == 0 {
			return backend.Event{}, false, err
		}
		return evs[0], true, nil
	}
	last, ok, err := newest()
	if err != nil || !ok {
		return 0, err
	}
	// old is the greatest id known to be of an entry older than before
	// (or of none); every entry above young is younger. Entries are
	// appended in about the order of their times, which the search
	// assumes, as the sweep's age limit does.
	old, young := int64(0), last.ID
	if last.Time.Before(before) {
		old = last.ID
	}
	for young-old > 1 {
		mid := old + (young-old)/2
		evs, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Before: mid + 1, Limit: 1})
		if err != nil {
			return 0, err
		}
		if len(evs) == 0 || evs[0].ID <= old || evs[0].Time.Before(before) {
			old = mid
		} else {
			young = evs[0].ID
		}
	}
	if old == 0 {
		return 0, nil
	}
	// Count the entries above old, then, before each call, those appended
	// since: ids in a row on most drivers, or page by page.
	_, gapless := s.c.raw.(backend.ConsecutiveHistory)
	if gapless {
		gapless = s.c.raw.(backend.ConsecutiveHistory).ConsecutiveHistory()
	}
	var younger int64
	top := old
	if !gapless {
		// Where ids have gaps, count the entries above old as all of them
		// less those at or below old, which costs what the trim removes
		// rather than what it keeps. The newest id is read before the
		// total, so that an entry appended in between is counted twice
		// (keeping one more) rather than not at all.
		if top, err = s.newestID(ctx, old); err != nil {
			return 0, err
		}
		c, err := s.c.drv.Count(ctx, &backend.CountQuery{NS: s.ns})
		if err != nil {
			return 0, err
		}
		below, err := s.countAtOrBelow(ctx, old)
		if err != nil {
			return 0, err
		}
		younger = max(c.Events-below, 0)
	}
	var total int64
	for {
		n, newTop, err := s.countAbove(ctx, top, gapless)
		if err != nil {
			return total, err
		}
		younger, top = younger+n, newTop
		r, err := s.c.drv.TrimHistory(ctx, &backend.TrimQuery{NS: s.ns, Keep: max(younger+trimMargin, 1), Limit: sweepBatch})
		total += r.Events
		if err != nil || !r.More {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// countAbove returns how many entries of the namespace have ids above
// after, and the newest id (after when there is none above it): from the
// newest id alone when ids are consecutive, else by paging back to after.
func (s *Store) countAbove(ctx context.Context, after int64, gapless bool) (int64, int64, error) {
	limit := 1000
	if gapless {
		limit = 1
	}
	var n int64
	top, before := after, int64(0)
	for {
		evs, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Before: before, Limit: limit})
		if err != nil {
			return 0, 0, err
		}
		if len(evs) > 0 && before == 0 {
			top = max(top, evs[0].ID)
			if gapless {
				return max(top-after, 0), top, nil
			}
		}
		for _, ev := range evs {
			if ev.ID <= after {
				return n, top, nil
			}
			n++
		}
		if len(evs) < limit {
			return n, top, nil
		}
		before = evs[len(evs)-1].ID
	}
}

// newestID returns the id of the namespace's newest entry, or none when
// it has no entry.
func (s *Store) newestID(ctx context.Context, none int64) (int64, error) {
	evs, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Limit: 1})
	if err != nil || len(evs) == 0 {
		return none, err
	}
	return evs[0].ID, nil
}

// countAtOrBelow returns how many entries of the namespace have ids of at
// most id, reading them a page at a time.
func (s *Store) countAtOrBelow(ctx context.Context, id int64) (int64, error) {
	const page = 1000
	var n int64
	before := id + 1
	for {
		evs, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Before: before, Limit: page})
		if err != nil {
			return 0, err
		}
		n += int64(len(evs))
		if len(evs) < page {
			return n, nil
		}
		before = evs[len(evs)-1].ID
	}
}
