package state

import (
	"context"
	"sync"
	"sync/atomic"

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
