package sqlitestate

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/statesidecar/state/backend"
)

var (
	_ backend.Notifier           = (*Driver)(nil)
	_ backend.ConsecutiveHistory = (*Driver)(nil)
)

// Notify implements backend.Notifier with one cheap check, however many
// wait. Every Options.ChangeInterval it looks at the size and modification
// time of the write-ahead log (one stat system call): every commit, of this
// process or another, appends to it. Every twentieth interval, and
// whenever the log looks changed, it also reads PRAGMA data_version on a
// connection of its own, which SQLite changes when any other connection
// has committed: the authoritative check, for a commit the file times
// could hide. SQLite does not say which namespace changed, so a change
// calls fn(""); package state then reads the history of the namespaces
// that have waiters.
func (d *Driver) Notify(ctx context.Context, fn func(ns string)) error {
	done, err := d.enter(ctx)
	if err != nil {
		return err
	}
	db, err := sql.Open("sqlite", d.readDSN)
	done()
	if err != nil {
		return fmt.Errorf("sqlitestate: notify: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return ctxOr(ctx, fmt.Errorf("sqlitestate: notify: %w", err))
	}
	defer conn.Close()
	stmt, err := conn.PrepareContext(ctx, `PRAGMA data_version`)
	if err != nil {
		return ctxOr(ctx, fmt.Errorf("sqlitestate: notify: %w", err))
	}
	defer stmt.Close()
	var version int64
	if err := stmt.QueryRowContext(ctx).Scan(&version); err != nil {
		return ctxOr(ctx, fmt.Errorf("sqlitestate: notify: %w", err))
	}
	wal := walStamp(d.path)
	tick := time.NewTicker(d.changeEvery)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		w := walStamp(d.path)
		if w == wal && n%20 != 0 {
			continue
		}
		wal = w
		var v int64
		if err := stmt.QueryRowContext(ctx).Scan(&v); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fn("") // cannot tell: let the waiters look
			continue
		}
		if v != version {
			version = v
			fn("")
		}
	}
}

// walStamp is the size and modification time of the database's
// write-ahead log, or zero when it cannot be read.
func walStamp(path string) [2]int64 {
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		return [2]int64{}
	}
	return [2]int64{fi.Size(), fi.ModTime().UnixNano()}
}

// ctxOr returns ctx's error if it ended, else err.
func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ConsecutiveHistory implements backend.ConsecutiveHistory: a namespace's
// event ids count up by one (state_namespaces.event) under SQLite's single
// writer, so they become visible in order.
func (d *Driver) ConsecutiveHistory() bool { return true }
