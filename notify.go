package state

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state/backend"
)

// Waiting for change costs the backend little however many wait: a store
// keeps one tail per namespace that has waiters. The tail learns that its
// namespace may have changed (from the store's own writes at once, from
// the driver's backend.Notifier for other processes' writes, and on its
// poll interval as a safety net), reads the history events appended since
// the last it saw, in one query, and wakes only the waiters those events
// concern. A woken waiter reads what it waits on again. A waiter also
// reads again on its own, rarely (recheckEvery), so that a change the tail
// cannot see (a Reset by another process followed at once by other writes)
// delays it but never leaves it hanging.

// tailPage is how many events a tail reads per query.
const tailPage = 256

// tailLinger is how long a tail without waiters lives on, so that a client
// that waits again and again (a long-poll loop) does not restart it each
// time.
const tailLinger = 30 * time.Second

// recheckEvery is how many poll intervals a waiter waits before it reads
// what it waits on again without being woken: a minute by default, longer
// than a tool's long-poll, since the tail's poll already catches a lost
// notification and a thousand waiters reading every few seconds would cost
// an idle process more than everything else.
const recheckEvery = 600

// hub holds a store's tails.
type hub struct {
	c        *core
	notifier bool // the driver can notify (backend.Notifier), as far as is known
	// consecutive is set when event ids are consecutive, so that a jump
	// in them tells that events were removed.
	consecutive bool
	mu          sync.Mutex
	tails       map[string]*tail
	notified    bool          // the notifier has been started
	armed       chan struct{} // closed once the notifier listens, or gave up
	arm         func()        // closes armed, once
	wg          sync.WaitGroup
	parked      atomic.Int64 // waiters blocked in wait
}

// tail follows one namespace's history for the waiters of that namespace.
type tail struct {
	ns    string
	kick  chan struct{} // buffered: the namespace may have changed
	ready chan struct{} // closed once last is known
	last  int64         // the id of the newest event dispatched; -1: unknown
	tried bool          // history has been read once (successfully or not)
	subs  map[*waiter]struct{}
	idle  time.Time // when the last waiter left
}

// A waiter is woken when an event it matches is appended.
type waiter struct {
	t     *tail
	match func(backend.Event) bool // nil: every event
	wake  chan struct{}            // buffered
}

func newHub(c *core) *hub {
	h := &hub{c: c, tails: map[string]*tail{}, armed: make(chan struct{}),
		notifier: c.drv.notifier != nil, consecutive: c.drv.consecutive}
	h.arm = sync.OnceFunc(func() { close(h.armed) })
	return h
}

// pollInterval is how often a tail reads its namespace's history when
// nothing told it to.
func (h *hub) pollInterval() time.Duration {
	if h.notifier {
		return 10 * h.c.opts.WaitPollInterval
	}
	return h.c.opts.WaitPollInterval
}

// poke tells the tail of ns, if any, that ns may have changed; "" means
// every namespace.
func (h *hub) poke(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ns == "" {
		for _, t := range h.tails {
			t.kicked()
		}
		return
	}
	if t := h.tails[ns]; t != nil {
		t.kicked()
	}
}

func (t *tail) kicked() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// subscribe registers a waiter on ns woken by the events match accepts (all
// when match is nil). It returns once the tail knows where history stands
// and the driver's notifier listens, so that every event appended after
// subscribe returns wakes the waiter.
func (h *hub) subscribe(ctx context.Context, ns string, match func(backend.Event) bool) (*waiter, error) {
	h.mu.Lock()
	if h.c.bg.Err() != nil {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	t := h.tails[ns]
	if t == nil {
		t = &tail{ns: ns, kick: make(chan struct{}, 1), ready: make(chan struct{}), last: -1, subs: map[*waiter]struct{}{}}
		h.tails[ns] = t
		h.wg.Go(func() { h.run(t) })
	}
	if h.notifier && !h.notified {
		h.notified = true
		h.wg.Go(h.notify)
	}
	w := &waiter{t: t, match: match, wake: make(chan struct{}, 1)}
	t.subs[w] = struct{}{}
	armed := h.armed
	if !h.notified {
		armed = nil // no notifier: nothing to wait for
	}
	h.mu.Unlock()
	for _, ch := range []chan struct{}{t.ready, armed} {
		if ch == nil {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			h.unsubscribe(w)
			return nil, ctx.Err()
		case <-h.c.bg.Done():
			h.unsubscribe(w)
			return nil, ErrClosed
		}
	}
	return w, nil
}

func (h *hub) unsubscribe(w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(w.t.subs, w)
	if len(w.t.subs) == 0 {
		w.t.idle = time.Now()
	}
}

// notify runs the driver's notifier until the store closes. If it fails,
// the tails' polling carries on alone.
func (h *hub) notify() {
	defer h.arm()
	err := h.c.drv.Notify(h.c.bg, func(ns string) {
		h.arm()
		h.poke(ns)
	})
	if err != nil && h.c.bg.Err() == nil {
		h.c.opts.Logger.Warn("state: change notifications stopped; waiters fall back to polling", "err", err)
		h.mu.Lock()
		h.notifier = false
		h.mu.Unlock()
	}
}

// run follows t's namespace until the store closes or t has had no waiter
// for tailLinger.
func (h *hub) run(t *tail) {
	defer func() {
		select {
		case <-t.ready:
		default:
			close(t.ready)
		}
	}()
	h.advance(t)
	close(t.ready)
	for {
		h.mu.Lock()
		poll := h.pollInterval()
		h.mu.Unlock()
		tm := time.NewTimer(poll)
		select {
		case <-h.c.bg.Done():
			tm.Stop()
			return
		case <-t.kick:
			tm.Stop()
		case <-tm.C:
			h.mu.Lock()
			if len(t.subs) == 0 && time.Since(t.idle) >= tailLinger {
				delete(h.tails, t.ns)
				h.mu.Unlock()
				return
			}
			h.mu.Unlock()
		}
		h.advance(t)
	}
}

// advance reads the events t has not seen yet and wakes the waiters they
// concern. When it cannot tell what changed (a failed read, events lost to
// a Reset or to trimming), it wakes every waiter.
func (h *hub) advance(t *tail) {
	ctx, cancel := context.WithTimeout(h.c.bg, 10*max(h.c.opts.WaitPollInterval, time.Second))
	evs, err := h.c.eventsSince(ctx, t.ns, t.last)
	cancel()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		t.tried = true
		if h.c.bg.Err() == nil {
			h.c.opts.Logger.Warn("state: reading history for waiters", "namespace", t.ns, "err", err)
		}
		for w := range t.subs {
			w.woken()
		}
		return
	}
	if t.last < 0 {
		// Where history stands is known from now on. If an earlier read
		// failed, waiters may have missed events since they subscribed.
		t.last = 0
		if len(evs) > 0 {
			t.last = evs[len(evs)-1].ID
		}
		if t.tried {
			for w := range t.subs {
				w.woken()
			}
		}
		t.tried = true
		return
	}
	if len(evs) == 0 {
		return
	}
	gap := h.consecutive && evs[0].ID != t.last+1
	t.last = evs[len(evs)-1].ID
	for w := range t.subs {
		if gap || w.concerns(evs) {
			w.woken()
		}
	}
}

// eventsSince returns the events of ns with ids above after, oldest first;
// when after is negative, only the newest event (to learn where history
// stands). Event ids are consecutive, so a first event whose id is not
// after+1 tells that events were removed in between.
func (c *core) eventsSince(ctx context.Context, ns string, after int64) ([]backend.Event, error) {
	var out []backend.Event
	before := int64(0)
	limit := tailPage
	if after < 0 {
		limit = 1
	}
	for {
		page, err := c.readHistory(ctx, ns, before, limit)
		if err != nil {
			return nil, err
		}
		for _, e := range page {
			if e.ID <= after {
				return reversed(out), nil
			}
			out = append(out, e)
		}
		if len(page) < limit || after < 0 {
			return reversed(out), nil
		}
		before = page[len(page)-1].ID
	}
}

// readHistory reads one page of ns's history, newest first, while the
// store is open.
func (c *core) readHistory(ctx context.Context, ns string, before int64, limit int) ([]backend.Event, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	return c.drv.History(ctx, &backend.HistoryQuery{NS: ns, Before: before, Limit: limit})
}

func reversed(evs []backend.Event) []backend.Event {
	for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
		evs[i], evs[j] = evs[j], evs[i]
	}
	return evs
}

func (w *waiter) concerns(evs []backend.Event) bool {
	if w.match == nil {
		return true
	}
	for _, e := range evs {
		if w.match(e) {
			return true
		}
	}
	return false
}

func (w *waiter) woken() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// wait blocks until w is woken, until its recheck interval or the store
// clock's time at (when not zero) passes, or until ctx ends or the store
// closes. It reports nil for all but the last two.
func (h *hub) wait(ctx context.Context, w *waiter, at time.Time) error {
	d := time.Duration(float64(recheckEvery*h.c.opts.WaitPollInterval) * (0.5 + rand.Float64()))
	tm := time.NewTimer(d)
	defer tm.Stop()
	var expiry <-chan time.Time
	if !at.IsZero() {
		ch, stop := h.c.timerAt(at)
		defer stop()
		expiry = ch
	}
	h.parked.Add(1)
	defer h.parked.Add(-1)
	select {
	case <-w.wake:
		return nil
	case <-tm.C:
		return nil
	case <-expiry:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.c.bg.Done():
		return ErrClosed
	}
}

// reset wakes every waiter of ns: a Reset removes records and events
// without appending any.
func (h *hub) reset(ns string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.tails[ns]; t != nil {
		for w := range t.subs {
			w.woken()
		}
	}
}

// stop waits for the tails and the notifier to end; the store's background
// context has been cancelled. Taking mu first makes sure that no subscribe
// starts another goroutine meanwhile.
func (h *hub) stop() {
	h.mu.Lock()
	h.mu.Unlock() //nolint:staticcheck // an empty critical section orders subscribe before Wait
	h.wg.Wait()
}

// Waiting returns the number of calls blocked waiting for a change (Watch,
// WaitKey, WaitRun, WaitRunFunc) on the store, every namespace included:
// a gauge for metrics, and a way for tests to know that a waiter waits.
func (s *Store) Waiting() int { return int(s.c.hub.parked.Load()) }
