package state

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/statesidecar/state/backend"
)

// Version is the version of this library, reported by Health.
const Version = "0.1.0"

// A Store is a handle to durable coordination state in one namespace of a
// backend. It is safe for concurrent use. Create one with New or Open, narrow
// it with Namespace, and Close it when done.
type Store struct {
	c  *core
	ns string
}

// core is what every namespace view of a store shares.
type core struct {
	drv     *gate // the backend: every call to it goes through here
	raw     backend.Driver
	clock   Clock
	server  *serverClock // non-nil when the backend's server decides expiry
	trim    *trimmer     // keeps history within its limit as it is written
	hub     *hub         // wakes the waiters when their namespace changes
	opts    Options
	started time.Time
	mu      sync.RWMutex // held for reading by calls, for writing by Close
	closed  bool
	// bg is the context of the background goroutines; Close cancels it,
	// which ends a sweep or a clock read in progress.
	bg       context.Context
	bgCancel context.CancelFunc
	stopped  chan struct{} // closed when every background goroutine has ended
	// keepalives counts the running KeepAlive goroutines, which end when bg
	// is cancelled.
	keepalives sync.WaitGroup
	// parents remembers the parents of child runs (children.go).
	parents parentCache
}

// New returns a Store over d; opts may be nil. It returns an error matching
// ErrInvalid, and leaves d open, when d is nil, opts names an invalid
// namespace or sets a ClaimTTL below a millisecond or above 100 years.
//
// Unless opts.SweepInterval is negative, New starts a goroutine that removes
// expired records and old history in the background; for a backend whose
// server decides the time (Redis), another keeps the store's timestamps in
// step with the server's clock. Close stops both. A backend that can check
// its server's configuration (backend.ConfigChecker) is asked at once, and
// what it finds is logged as a warning (Options.Logger).
func New(d backend.Driver, opts *Options) (*Store, error) {
	if d == nil {
		return nil, wrap("new", "", invalid("driver", "must not be nil"))
	}
	o := opts.withDefaults()
	if err := checkNamespace(o.Namespace); err != nil {
		return nil, wrap("new", "", err)
	}
	if err := checkTTL("Options.ClaimTTL", o.ClaimTTL); err != nil {
		return nil, wrap("new", "", err)
	}
	c := &core{drv: newGate(d, o.Tracer, o.Observer), raw: d, opts: o, started: time.Now(), stopped: make(chan struct{})}
	if o.Encryption != nil {
		ciph, err := o.Encryption.Bind(DriverKeyTable(d))
		if err != nil {
			return nil, wrap("new", "", fmt.Errorf("Options.Encryption: %w", err))
		}
		c.drv.seal = &sealer{c: ciph}
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	c.trim = newTrimmer(c.drv, o)
	c.drv.trim = c.trim
	c.hub = newHub(c)
	c.trim.notify = c.hub.poke
	switch {
	case o.Clock != nil:
		c.clock = o.Clock
	case c.drv.clock != nil:
		c.server = &serverClock{src: c.drv}
		c.clock = c.server
	default:
		c.clock = systemClock{}
	}
	go c.background()
	return &Store{c: c, ns: o.Namespace}, nil
}

// Namespace returns a view of the store in namespace ns: keys, runs, leases,
// sessions, history, counts and Reset of one namespace are invisible to every
// other. Views share the store's backend and lifetime: closing any of them
// closes the store. A namespace name has 1 to 64 letters, digits, '-', '_'
// or '.'.
func (s *Store) Namespace(ns string) (*Store, error) {
	if err := checkNamespace(ns); err != nil {
		return nil, wrap("namespace", ns, err)
	}
	return &Store{c: s.c, ns: ns}, nil
}

// NamespaceName returns the store's namespace.
func (s *Store) NamespaceName() string { return s.ns }

// Backend returns the name of the backend, such as "sqlite".
func (s *Store) Backend() string { return s.c.drv.name }

// ClaimTTL returns the claim TTL ClaimRun uses when a call does not set one.
func (s *Store) ClaimTTL() time.Duration { return s.c.opts.ClaimTTL }

// Driver returns the backend driver, for tests and tools.
func (s *Store) Driver() backend.Driver { return s.c.raw }

// Close stops the background goroutines (cancelling a sweep in progress)
// and every KeepAlive, ends every wait (Watch, WaitKey, WaitRun) with
// ErrClosed, waits for calls in flight and closes the backend. Later calls
// return ErrClosed, and so does a second Close.
func (s *Store) Close() error {
	c := s.c
	c.bgCancel()
	<-c.stopped
	c.hub.stop()
	c.mu.Lock() // waits for calls in flight
	if c.closed {
		c.mu.Unlock()
		return wrap("close", "", ErrClosed)
	}
	c.closed = true
	c.mu.Unlock()
	c.keepalives.Wait()
	return wrap("close", "", c.drv.Close())
}

// enter marks the start of a call; the returned function marks its end.
func (s *Store) enter() (func(), error) {
	s.c.mu.RLock()
	if s.c.closed {
		s.c.mu.RUnlock()
		return nil, ErrClosed
	}
	return s.c.mu.RUnlock, nil
}

// now returns the time to stamp writes with, truncated to milliseconds, and
// the time to hand the driver: the same, or zero when the server decides.
func (s *Store) now() (stamp, drv time.Time) {
	stamp = s.c.clock.Now().UTC().Truncate(time.Millisecond)
	if s.c.server != nil {
		return stamp, time.Time{}
	}
	return stamp, stamp
}

// commit applies txn in the store's namespace.
func (s *Store) commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	txn.NS = s.ns
	_, txn.Now = s.now()
	return s.c.drv.Commit(ctx, txn)
}

// updateFunc computes the writes of a read-modify-write from the records it
// read (in the order of the keys) and the time they were read at. It must
// not have side effects: it may run more than once.
type updateFunc func(recs []backend.Record, now time.Time) (*backend.Txn, error)

// update reads keys and commits what fn returns as one atomic step: natively
// when the driver is a backend.Updater, otherwise by committing under a
// condition on every key read and retrying when another writer won.
func (s *Store) update(ctx context.Context, keys []string, fn updateFunc) (backend.Result, error) {
	stamp, drvNow := s.now()
	q := &backend.GetQuery{NS: s.ns, Keys: keys, Now: drvNow, IncludeExpired: true}
	if s.c.drv.upd != nil {
		return s.c.drv.Update(ctx, q, fn)
	}
	for {
		recs, err := s.c.drv.GetMany(ctx, q)
		if err != nil {
			return backend.Result{}, err
		}
		now := drvNow
		if now.IsZero() {
			now = stamp
		}
		txn, err := fn(recs, now)
		if err != nil {
			return backend.Result{}, err
		}
		if txn == nil {
			return backend.Result{Committed: true, Failed: -1, Now: now}, nil
		}
		conds := make([]backend.Cond, 0, len(recs)+len(txn.If))
		for _, r := range recs {
			rev := int64(0)
			if r.Live() {
				rev = r.Revision
			}
			conds = append(conds, backend.Cond{Key: r.Key, Revision: rev})
		}
		txn.If = append(conds, txn.If...)
		txn.NS, txn.Now = s.ns, drvNow
		res, err := s.c.drv.Commit(ctx, txn)
		if err != nil || res.Committed || res.Failed >= len(recs) {
			if res.Failed >= len(recs) {
				res.Failed -= len(recs)
			}
			return res, err
		}
		// Another writer changed what we read: read again.
		if err := ctx.Err(); err != nil {
			return backend.Result{}, err
		}
		stamp, drvNow = s.now()
		q.Now = drvNow
	}
}

// background runs the store's background work until Close: the sweeper
// and, for a backend whose server decides the time, the clock sync.
func (c *core) background() {
	defer close(c.stopped)
	var wg sync.WaitGroup
	if c.drv.config != nil {
		wg.Go(c.checkConfig)
	}
	if c.server != nil {
		wg.Go(c.syncClock)
	}
	if c.opts.SweepInterval > 0 {
		wg.Go(c.sweepEvery)
	}
	wg.Wait()
}

// syncClock reads the server's clock at once and then every
// Options.ClockSyncInterval, whether or not sweeping is on.
func (c *core) syncClock() {
	for {
		ctx, cancel := context.WithTimeout(c.bg, clockSyncTimeout)
		if err := c.server.sync(ctx); err != nil && c.bg.Err() == nil {
			c.opts.Logger.Warn("state: reading the backend server's clock", "err", err)
		}
		cancel()
		if c.opts.ClockSyncInterval < 0 || !c.wait(c.opts.ClockSyncInterval) {
			return
		}
	}
}

// checkConfig logs, loudly, what the backend says about its configuration
// that weakens the store's guarantees.
func (c *core) checkConfig() {
	ctx, cancel := context.WithTimeout(c.bg, clockSyncTimeout)
	defer cancel()
	warnings, err := c.drv.CheckConfig(ctx)
	if err != nil && c.bg.Err() == nil {
		c.opts.Logger.Warn("state: could not check the backend's configuration", "backend", c.drv.name, "err", err)
	}
	for _, w := range warnings {
		c.opts.Logger.Warn("state: WARNING: the backend's configuration weakens the store's guarantees: "+w, "backend", c.drv.name)
	}
}

// clockSyncTimeout bounds one reading of the server's clock.
const clockSyncTimeout = 5 * time.Second

// sweepEvery sweeps every Options.SweepInterval. A sweep in progress when
// Close is called is cancelled, and none starts after.
func (c *core) sweepEvery() {
	for c.wait(c.opts.SweepInterval) {
		ctx, cancel := context.WithTimeout(c.bg, c.opts.SweepInterval)
		st := &Store{c: c, ns: c.opts.Namespace}
		if _, err := st.sweep(ctx); err != nil && c.bg.Err() == nil {
			c.opts.Logger.Warn("state: background sweep", "err", err)
		}
		cancel()
	}
}

// wait waits for d and reports whether the store is still open.
func (c *core) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.bg.Done():
		return false
	case <-t.C:
		return c.bg.Err() == nil
	}
}
