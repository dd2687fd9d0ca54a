package sidecar

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connections (issue 20). At most MaxConnections are open at once, but an
// idle connection does not hold its place against a client that needs one:
// when every place is taken, the oldest idle connection is closed to make
// room (an unauthenticated one first), and Accept waits only while every
// connection is busy with a request, which the per-tenant limits bound.
// On a sidecar with tokens, a connection is unauthenticated until a request
// on it passes authentication: such connections get
// FairConfig.UnauthenticatedIdleTimeout to send headers or to stay idle, and
// at most FairConfig.MaxUnauthenticatedConnections of them are open (beyond
// it, the oldest idle or silent one is closed).

// Metric names of connections.
const (
	MetricConnections        = "state_sidecar_connections"
	MetricConnectionsEvicted = "state_sidecar_connections_closed_early_total"
)

// Reasons a connection is closed early, as MetricConnectionsEvicted's label.
const (
	evictFull   = "full"
	evictUnauth = "unauthenticated_share"
)

// A connTracker tracks a server's connections and caps them.
type connTracker struct {
	max, maxUnauth int
	unauthIdle     time.Duration
	tokens         bool
	slots          chan struct{}
	wake           chan struct{}

	mu      sync.Mutex
	conns   map[*trackedConn]struct{}
	unauth  int
	waiting bool // Accept waits for a place

	evicted *prometheus.CounterVec
}

func newConnTracker(cfg Config, reg prometheus.Registerer) *connTracker {
	t := &connTracker{
		max: cfg.MaxConnections, maxUnauth: cfg.Fair.MaxUnauthenticatedConnections,
		unauthIdle: cfg.Fair.UnauthenticatedIdleTimeout, tokens: cfg.authenticates(),
		slots: make(chan struct{}, cfg.MaxConnections), wake: make(chan struct{}, 1),
		conns: map[*trackedConn]struct{}{},
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricConnectionsEvicted,
			Help: "Idle or silent connections closed to make room: full (every place taken) or unauthenticated_share."},
			[]string{"reason"}),
	}
	t.evicted.WithLabelValues(evictFull)
	t.evicted.WithLabelValues(evictUnauth)
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricConnections,
		Help: "Open HTTP connections."}, func() float64 { n, _ := t.counts(); return float64(n) })
	unauth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricConnections + "_unauthenticated",
		Help: "Open HTTP connections that have not made an authenticated request (with tokens)."},
		func() float64 { _, n := t.counts(); return float64(n) })
	reg.MustRegister(t.evicted, open, unauth)
	return t
}

// counts returns the open and the unauthenticated connections.
func (t *connTracker) counts() (open, unauth int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns), t.unauth
}

// listener returns ln behind the tracker.
func (t *connTracker) listener(ln net.Listener) net.Listener {
	return &trackedListener{Listener: ln, t: t, done: make(chan struct{})}
}

// A trackedListener accepts connections as its tracker allows.
type trackedListener struct {
	net.Listener
	t    *connTracker
	done chan struct{}
	once sync.Once
}

// Accept waits for a place (closing an idle connection to make one), then
// for a connection.
func (l *trackedListener) Accept() (net.Conn, error) {
	if !l.t.acquire(l.done) {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.t.slots
		return nil, err
	}
	return l.t.add(c), nil
}

// Close closes the listener and ends a wait in Accept.
func (l *trackedListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// acquire takes a place, closing idle connections while every place is
// taken, and waiting while none is idle. It returns false once done is
// closed.
func (t *connTracker) acquire(done <-chan struct{}) bool {
	for {
		select {
		case t.slots <- struct{}{}:
			t.setWaiting(false)
			return true
		default:
		}
		t.mu.Lock()
		victim := t.pick(false, nil)
		t.waiting = victim == nil
		t.mu.Unlock()
		if victim != nil {
			t.evict(victim, evictFull)
		}
		select {
		case t.slots <- struct{}{}:
			t.setWaiting(false)
			return true
		case <-t.wake: // a connection went idle: try again
		case <-done:
			t.setWaiting(false)
			return false
		}
	}
}

func (t *connTracker) setWaiting(w bool) {
	t.mu.Lock()
	t.waiting = w
	t.mu.Unlock()
}

// add tracks a new connection; beyond the unauthenticated share it closes
// the oldest idle or silent unauthenticated one.
func (t *connTracker) add(c net.Conn) *trackedConn {
	tc := &trackedConn{Conn: c, t: t, state: http.StateNew, since: time.Now()}
	tc.authed.Store(!t.tokens)
	var victim *trackedConn
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	if t.tokens {
		t.unauth++
		if t.unauth > t.maxUnauth {
			victim = t.pick(true, tc)
		}
	}
	t.mu.Unlock()
	if victim != nil {
		t.evict(victim, evictUnauth)
	}
	return tc
}

// pick returns the connection to close to make room, or nil: an idle one,
// or an unauthenticated new one silent for silentAge; unauthenticated
// first, then idle before silent, then the oldest. t.mu is held.
func (t *connTracker) pick(unauthOnly bool, except *trackedConn) *trackedConn {
	var best *trackedConn
	rank := func(c *trackedConn) int {
		r := 0
		if c.state == http.StateNew {
			r += 2
		}
		if c.authed.Load() {
			r++
		}
		return r
	}
	silentSince := time.Now().Add(-silentAge)
	for c := range t.conns {
		if c == except || c.evicted {
			continue
		}
		authed := c.authed.Load()
		if unauthOnly && authed {
			continue
		}
		switch c.state {
		case http.StateIdle:
		case http.StateNew:
			if authed || c.since.After(silentSince) {
				continue // a client that connected just now is sending its request
			}
		default:
			continue
		}
		if best == nil || rank(c) < rank(best) || (rank(c) == rank(best) && c.since.Before(best.since)) {
			best = c
		}
	}
	if best != nil {
		best.evicted = true
	}
	return best
}

// silentAge is how long a new connection may stay silent before it may be
// closed to make room.
const silentAge = time.Second

// evict closes c early.
func (t *connTracker) evict(c *trackedConn, reason string) {
	t.evicted.WithLabelValues(reason).Inc()
	_ = c.Close()
}

// connState is the server's http.Server.ConnState hook.
func (t *connTracker) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	tc.state, tc.since = st, time.Now()
	wake := st == http.StateIdle && t.waiting
	t.mu.Unlock()
	if wake {
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// A trackedConn is a connection its tracker knows.
type trackedConn struct {
	net.Conn
	t      *connTracker
	authed atomic.Bool // written under t.mu
	once   sync.Once

	// Under t.mu.
	state   http.ConnState
	since   time.Time
	evicted bool
}

// Close closes the connection and frees its place.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		t := c.t
		t.mu.Lock()
		delete(t.conns, c)
		if !c.authed.Load() {
			t.unauth--
		}
		t.mu.Unlock()
		<-t.slots
	})
	return err
}

// SetReadDeadline sets the read deadline, at most UnauthenticatedIdleTimeout
// from now while the connection has not authenticated: net/http sets the
// deadlines of headers and of idleness through it.
func (c *trackedConn) SetReadDeadline(d time.Time) error {
	if !d.IsZero() && !c.authed.Load() {
		if limit := time.Now().Add(c.t.unauthIdle); d.After(limit) {
			d = limit
		}
	}
	return c.Conn.SetReadDeadline(d)
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *trackedConn) SetDeadline(d time.Time) error {
	if err := c.Conn.SetWriteDeadline(d); err != nil {
		return err
	}
	return c.SetReadDeadline(d)
}

// authenticated marks the connection as having made an authenticated
// request.
func (c *trackedConn) authenticated() {
	if c.authed.Load() {
		return
	}
	t := c.t
	t.mu.Lock()
	if !c.authed.Load() {
		c.authed.Store(true)
		t.unauth--
	}
	t.mu.Unlock()
}

// connKey holds, in a request's context, its connection.
type connKey struct{}

// withConn is the server's http.Server.ConnContext hook.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// markAuthenticated marks r's connection as authenticated: r passed
// authentication, if the sidecar has tokens.
func markAuthenticated(r *http.Request) {
	if tc, ok := r.Context().Value(connKey{}).(*trackedConn); ok {
		tc.authenticated()
	}
}
