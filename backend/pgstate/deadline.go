package pgstate

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// boundConns makes every connection of the pool of cfg fail a round trip
// that takes longer than timeout: each write to the socket (a request) sets
// the socket's deadline to now + timeout, or to the deadline pgx set for the
// call's context when that is sooner. A database that stops answering then
// fails every call after timeout, even a call whose context has no
// deadline, at the cost of a timer update per request rather than a
// context and a watcher per call.
func boundConns(cfg *pgxpool.Config, timeout time.Duration) {
	dial := cfg.ConnConfig.DialFunc
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &boundedConn{Conn: c, timeout: timeout}, nil
	}
}

// boundedConn is a connection whose every write sets its deadline. It keeps
// the deadline pgx sets (when a call's context ends, pgx sets the deadline
// to now to interrupt the call) so that a write never pushes that deadline
// back; mu orders the two, whichever goroutine sets it.
type boundedConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	pgx     time.Time // the deadline pgx set last; zero: none
}

// unbound stops c from setting deadlines of its own: the connection that
// listens for notifications waits for data without writing, and bounds its
// waits itself.
func (c *boundedConn) unbound() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timeout = 0
	_ = c.Conn.SetDeadline(c.pgx)
}

func (c *boundedConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.timeout <= 0 {
		c.mu.Unlock()
		return c.Conn.Write(b)
	}
	d := time.Now().Add(c.timeout)
	if !c.pgx.IsZero() && c.pgx.Before(d) {
		d = c.pgx
	}
	err := c.Conn.SetDeadline(d)
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pgx = t
	return c.Conn.SetDeadline(t)
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pgx = t
	return c.Conn.SetReadDeadline(t)
}

func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pgx = t
	return c.Conn.SetWriteDeadline(t)
}
