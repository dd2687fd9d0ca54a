package sqlitestate

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

var (
	_ backend.Notifier           = (*Driver)(nil)
	_ backend.ConsecutiveHistory = (*Driver)(nil)
)

// Notify implements backend.Notifier with one cheap check, however many
// wait: on a connection of its own, every Options.ChangeInterval, it reads
// PRAGMA data_version, which changes when any other connection (of this
// process or another) has committed to the file. It reads the file's
// header in shared memory, not the tables, so an idle check costs
// microseconds. SQLite does not say which namespace changed, so a change
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
	var last int64
	if err := stmt.QueryRowContext(ctx).Scan(&last); err != nil {
		return ctxOr(ctx, fmt.Errorf("sqlitestate: notify: %w", err))
	}
	tick := time.NewTicker(d.changeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		var v int64
		if err := stmt.QueryRowContext(ctx).Scan(&v); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fn("") // cannot tell: let the waiters look
			continue
		}
		if v != last {
			last = v
			fn("")
		}
	}
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
