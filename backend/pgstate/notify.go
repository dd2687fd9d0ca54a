package pgstate

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// OrderedHistory implements backend.OrderedHistory: a namespace's history
// stops at its settled horizon (see History), so events become visible in
// id order. Ids are not consecutive: a rolled back write's are skipped, and
// a sequence that fell behind the clock jumps.
func (d *Driver) OrderedHistory() bool { return true }

// listenOff is the Options.Listen that turns notifications off.
const listenOff = "off"

// ErrNoNotifications is returned by Notify when it cannot tell of changes:
// Options.Listen is "off", or a notification it sent itself did not arrive
// on its listening connection (PgBouncer in transaction pooling mode hands
// a LISTEN to a server connection that it then lends to other clients).
// Package state then polls.
var ErrNoNotifications = errors.New("pgstate: change notifications are off or do not arrive")

// probeWait bounds how long Notify waits for its own notification before it
// concludes that notifications do not arrive.
const probeWait = 2 * time.Second

// keepAlive is how long the listening connection stays idle before Notify
// checks that the database still answers on it: a connection that died
// without a word (a failover, a dropped NAT entry) would otherwise miss
// every notification silently.
const keepAlive = 15 * time.Second

// Notify implements backend.Notifier with LISTEN/NOTIFY: every function
// that draws a revision, and reset, sends pg_notify on the schema's
// channel with the namespace as payload (or "" when the namespace is too
// long for one), which PostgreSQL delivers when the write commits, but
// only while some process listens: PostgreSQL serialises the commits that
// notify, which would cost concurrent writers much of their throughput for
// nothing. So a listener registers in the schema's listeners table (and
// refreshes its row every 15 s; a row lives a minute), then waits for the
// writes in flight that may have missed the row to end.
//
// One connection of its own (not the pool's: see Options.Listen) listens
// until ctx ends. Once registered it sends a notification of its own through
// the pool and waits for it to arrive, so that a LISTEN that cannot
// receive (PgBouncer in transaction pooling mode) is told at once, as
// ErrNoNotifications, rather than missing every change. When the connection
// breaks, Notify calls fn("") (changes may have been missed), connects
// again with backoff and calls fn("") again once it listens.
func (d *Driver) Notify(ctx context.Context, fn func(ns string)) error {
	if d.nolisten {
		return ErrNoNotifications
	}
	cfg := d.listen
	if cfg == nil {
		cfg = d.pool.Config().ConnConfig
	}
	backoff := 50 * time.Millisecond
	for {
		listened, err := d.listenOn(ctx, cfg.Copy(), fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrNoNotifications) {
			return err
		}
		// Commits may have gone unnoticed; a waiter that subscribed before
		// the first connection listened (the database was down) is let go
		// on, and learns of them from the next call.
		fn("")
		if listened {
			backoff = 50 * time.Millisecond
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// listenOn connects with cfg, listens and calls fn until ctx ends or the
// connection fails. It reports whether it got as far as listening.
func (d *Driver) listenOn(ctx context.Context, cfg *pgx.ConnConfig, fn func(ns string)) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, keepAlive)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return false, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if bc, ok := conn.PgConn().Conn().(*boundedConn); ok {
		bc.unbound() // waits are bounded by keepAlive below
	}
	lctx, cancel := context.WithTimeout(ctx, keepAlive)
	_, err = conn.Exec(lctx, "LISTEN "+pgx.Identifier{d.channel}.Sanitize())
	cancel()
	if err != nil {
		return false, err
	}
	id := rand.Text()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, _ = conn.Exec(cctx, d.q.unlisten, id)
	}()
	if err := d.register(ctx, conn, id); err != nil {
		return false, err
	}
	if err := d.probe(ctx, conn); err != nil {
		return false, err
	}
	fn("")
	for {
		wctx, cancel := context.WithTimeout(ctx, keepAlive)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			fn(n.Payload)
			continue
		case ctx.Err() != nil:
			return true, ctx.Err()
		case !pgconn.Timeout(err) && !errors.Is(err, context.DeadlineExceeded):
			return true, err
		}
		// Idle: refresh the registration, which also checks that the
		// connection works. A registration that expired meanwhile (the
		// database stalled) let writers skip notifying: register again
		// and tell the caller that changes may have been missed.
		var live bool
		pctx, cancel := context.WithTimeout(ctx, keepAlive)
		err = conn.QueryRow(pctx, d.q.refresh, id, listenTTL.Milliseconds()).Scan(&live)
		cancel()
		if err != nil {
			return true, err
		}
		if !live {
			if err := d.register(ctx, conn, id); err != nil {
				return true, err
			}
			fn("")
		}
	}
}

// listenTTL is how long a listener's registration lives unless refreshed
// (every keepAlive).
const listenTTL = 4 * keepAlive

// register records conn's listener id in the schema's listeners, so that
// writers notify, and waits until every writer that may have checked
// before it committed has ended: their changes are then visible to the
// caller's next read.
func (d *Driver) register(ctx context.Context, conn *pgx.Conn, id string) error {
	rctx, cancel := context.WithTimeout(ctx, keepAlive)
	defer cancel()
	if _, err := conn.Exec(rctx, d.q.listen, id, listenTTL.Milliseconds()); err != nil {
		return err
	}
	var ended bool
	if err := conn.QueryRow(rctx, d.q.awaitWriters, int32(keepAlive.Milliseconds()/2)).Scan(&ended); err != nil {
		return err
	}
	if !ended {
		return errors.New("writes in flight did not end")
	}
	return nil
}

// probe sends a notification through the pool and waits for conn, which
// listens, to receive it; notifications for others that arrive meanwhile
// are dropped, as the caller calls fn("") next.
func (d *Driver) probe(ctx context.Context, conn *pgx.Conn) error {
	token := "probe " + rand.Text()
	if _, err := d.pool.Exec(ctx, "SELECT pg_notify($1::text, $2::text)", d.channel, token); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, probeWait)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil {
				return fmt.Errorf("%w: a notification took more than %v to arrive (PgBouncer in transaction pooling mode? "+
					"set the listen URL parameter, Options.Listen, to a direct connection string)", ErrNoNotifications, probeWait)
			}
			return err
		}
		if n.Payload == token {
			return nil
		}
	}
}
