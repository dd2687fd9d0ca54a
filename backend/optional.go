package backend

import (
	"context"
	"time"
)

// Updater is implemented by drivers that can run a read-modify-write in one
// atomic step, such as an in-process lock or a database transaction.
//
// Update reads the records of q as GetMany would, calls fn with them and the
// time they were evaluated at, and commits the Txn fn returns, all without any
// other write to those keys in between. fn may return a nil Txn to commit
// nothing (the Result is then Committed with Revision 0), or an error, which
// Update returns unchanged without writing anything. The Txn's NS and Now are
// ignored; its If conditions are still checked. fn must not call the driver.
//
// Fallback: package state reads with GetMany and commits with a condition on
// the revision of every key it read, retrying when another writer got there
// first. fn may therefore be called more than once; it must have no side
// effects beyond its return values.
type Updater interface {
	Update(ctx context.Context, q *GetQuery, fn func(recs []Record, now time.Time) (*Txn, error)) (Result, error)
}

// Sweeper is implemented by drivers that physically delete expired records
// and old history events in bounded batches.
//
// Fallback: without it, expired records stay stored (but invisible) until
// they are overwritten, deleted or reset, and history is not trimmed. Drivers
// whose engine expires data by itself may still implement it to trim indexes.
type Sweeper interface {
	Sweep(ctx context.Context, q *SweepQuery) (SweepResult, error)
}

// SweepQuery bounds one Sweep call. It applies to every namespace.
type SweepQuery struct {
	// Now is the time expiry is judged at; zero means the driver's clock.
	Now time.Time
	// Grace keeps records for this long after they expire, so that an
	// acquirer can still see whose lease it takes over.
	Grace time.Duration
	// Limit caps the number of records and the number of events deleted by
	// one call, so that a sweep never holds a lock for long.
	Limit int
	// HistoryMaxAge deletes events older than Now-HistoryMaxAge; 0 keeps all.
	HistoryMaxAge time.Duration
	// HistoryMaxEvents keeps at most this many newest events per namespace;
	// 0 keeps all.
	HistoryMaxEvents int64
}

// SweepResult reports what one Sweep call deleted.
type SweepResult struct {
	Records int64
	Events  int64
	// More is set when a limit was reached and another call would find more.
	More bool
}

// ServerClock is implemented by drivers shared by several processes whose
// server has a clock of its own. When a store has no injected clock, package
// state passes a zero now to such a driver so that the server decides expiry,
// and uses ServerTime to keep the timestamps it writes close to the server's.
type ServerClock interface {
	ServerTime(ctx context.Context) (time.Time, error)
}
