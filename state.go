package state

import (
	"context"
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
	drivers  // the backend, possibly observed
	raw      backend.Driver
	clock    Clock
	server   *serverClock // non-nil when the backend's server decides expiry
	opts     Options
	started  time.Time
	mu       sync.RWMutex // held for reading by calls, for writing by Close
	closed   bool
	stop     chan struct{}
	stopped  chan struct{}
	stopOnce sync.Once
}

// New returns a Store over d. It panics if d is nil. opts may be nil.
//
// Unless opts.SweepInterval is negative, New starts a goroutine that removes
// expired records and old history in the background; Close stops it.
func New(d backend.Driver, opts *Options) *Store {
	if d == nil {
		panic("state: New called with a nil backend.Driver")
	}
	o := opts.withDefaults()
	if err := checkNamespace(o.Namespace); err != nil {
		panic("state: New: " + err.Error())
	}
	c := &core{drivers: resolve(d, o.Observer), raw: d, opts: o, started: time.Now(),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	switch sc, ok := d.(backend.ServerClock); {
	case o.Clock != nil:
		c.clock = o.Clock
	case ok:
		c.server = &serverClock{src: sc}
		c.clock = c.server
	default:
		c.clock = systemClock{}
	}
	go c.background()
	return &Store{c: c, ns: o.Namespace}
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
func (s *Store) Backend() string { return s.c.drv.Name() }

// ClaimTTL returns the claim TTL ClaimRun uses when a call does not set one.
func (s *Store) ClaimTTL() time.Duration { return s.c.opts.ClaimTTL }

// Driver returns the backend driver, for tests and tools.
func (s *Store) Driver() backend.Driver { return s.c.raw }

// Close stops the background sweeper, waits for calls in flight and closes
// the backend. Later calls return ErrClosed, and so does a second Close.
func (s *Store) Close() error {
	c := s.c
	c.stopOnce.Do(func() { close(c.stop) })
	<-c.stopped
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return wrap("close", "", ErrClosed)
	}
	c.closed = true
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
	if s.c.upd != nil {
		return s.c.upd.Update(ctx, q, fn)
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

// background runs the sweeper (and keeps a server clock in step) until Close.
func (c *core) background() {
	defer close(c.stopped)
	if c.server != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := c.server.sync(ctx); err != nil {
			c.opts.Logger.Warn("state: reading the backend server's clock", "err", err)
		}
		cancel()
	}
	if c.opts.SweepInterval < 0 {
		<-c.stop
		return
	}
	t := time.NewTicker(c.opts.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.SweepInterval)
		if c.server != nil {
			if err := c.server.sync(ctx); err != nil {
				c.opts.Logger.Warn("state: reading the backend server's clock", "err", err)
			}
		}
		st := &Store{c: c, ns: c.opts.Namespace}
		if _, err := st.sweep(ctx, c.stop); err != nil {
			c.opts.Logger.Warn("state: background sweep", "err", err)
		}
		cancel()
	}
}
