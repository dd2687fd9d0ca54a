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
// wait: every Options.ChangeInterval, on a connection of its own, it reads
// PRAGMA data_version, which SQLite changes when any other connection (of
// this process or another) has committed. SQLite answers it from the
// write-ahead log's index in shared memory, without reading tables: tens
// of microseconds, less than the timer's own wake-up costs an idle
// process. SQLite does not say which namespace changed, so a change calls
// fn(""); package state then reads the history of the namespaces that have
// waiters.
func (d *Driver) Notify(ctx context.Context, fn func(ns string)) error {
	db, err := sql.Open("sqlite", d.readDSN)
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
	fn("") // listening: every later commit changes the version
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
		if v != version {
			version = v
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
