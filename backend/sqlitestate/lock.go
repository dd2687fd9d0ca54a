package sqlitestate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Waiting for another process's lock on the database is bounded everywhere
// by the lock timeout (Options.LockTimeout): reads retry busy errors within
// it (retryBusy), writes wait for the batcher and the write lock within it
// (batcher.doWithin), and a call that waited that long fails with an error
// matching backend.ErrUnavailable.

// isBusy reports whether err is SQLite's "database is locked" or "table is
// locked", which mean: try again.
func isBusy(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return true
	}
	return false
}

// retryBusy runs f until it returns something other than a busy error, ctx
// ends or the lock timeout passes, backing off between attempts. The
// reading connections have no busy timeout: this is where a read waits for
// a lock, within ctx as well as the lock timeout (so a statement itself
// never waits, and a point read need not watch ctx: see Get).
func (d *Driver) retryBusy(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(d.lockTimeout)
	wait := time.Millisecond
	for {
		err := f()
		if !isBusy(err) {
			return err
		}
		if !time.Now().Before(deadline) {
			return unavailable(d.lockTimeout, err)
		}
		t := time.NewTimer(min(wait, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting for the database lock: %v)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// unavailable is the error of a call that waited bound for a lock.
func unavailable(bound time.Duration, busy error) error {
	return fmt.Errorf("%w: the database stayed locked by another process for the lock timeout (%v): %v",
		backend.ErrUnavailable, bound, busy)
}

// Ping implements backend.Pinger: it takes the write lock in an empty
// transaction, waiting for it at most a second (or the lock timeout, if
// shorter), so that a readiness probe reports a database another process
// keeps locked as unavailable.
func (d *Driver) Ping(ctx context.Context) error {
	if err := d.batch.doWithin(ctx, min(pingLockWait, d.lockTimeout), func(*wtx) error { return nil }); err != nil {
		return fmt.Errorf("sqlitestate: ping: %w", err)
	}
	return nil
}
