package backend

import "context"

// Notifier is implemented by drivers that can tell, cheaply, that a
// namespace may have changed, including through another process sharing the
// backend: an in-process broadcast (memory), a change counter checked by one
// poller (SQLite's data_version), a publish from the write scripts (Redis
// pub/sub) or a notification sent on commit (PostgreSQL LISTEN/NOTIFY).
//
// Notify first calls fn("") as soon as it listens, and from then on calls
// fn with the namespace of every commit that wrote something or appended
// events, and of every Reset, soon after it is visible to reads, until ctx
// ends; then it returns ctx's error. (Package state waits for that first
// call before it lets a waiter wait, so that no commit falls between.) It calls fn with "" when any
// namespace may have changed without it knowing which, such as after it
// reconnected and may have missed notifications. It may call fn for a
// namespace that did not change, and more than once for one commit, but it
// must not miss a commit while it runs without calling fn with "" after.
// fn is fast and safe for concurrent use; Notify may call it from any
// goroutine, but must not call it after it returned. Package state calls
// Notify at most once per store, from its first waiter on, and keeps it
// running until the store is closed; a driver should therefore need one
// connection or goroutine for it, however many waiters there are. An error
// other than ctx's means Notify cannot notify at all; package state then
// falls back.
//
// Fallback: package state notices the writes made through the same Store at
// once, and checks every namespace that has waiters for new history events
// every Options.WaitPollInterval.
type Notifier interface {
	Notify(ctx context.Context, fn func(ns string)) error
}

// ConsecutiveHistory is implemented by drivers whose event IDs are
// consecutive within a namespace (each event's ID is one more than the
// namespace's previous event's, Reset and trimming notwithstanding) and
// become visible in ID order (a reader that sees an event sees every
// earlier one still stored). ConsecutiveHistory reports whether both hold.
//
// Package state's Watch then knows that a first event whose ID is not one
// more than the last one seen means events were removed unseen (a Reset, or
// retention), and says so instead of skipping them.
//
// Fallback: Watch delivers the events it finds in ID order but cannot tell
// that events were removed before it read them.
type ConsecutiveHistory interface {
	ConsecutiveHistory() bool
}

// OrderedHistory is implemented by drivers whose event IDs, without being
// consecutive (a sequence that skips the IDs of rolled back writes, say),
// become visible in ID order within a namespace: a reader of History that
// sees an event sees every earlier one still stored, so that one following
// history with a cursor never passes an event that is not visible yet.
// OrderedHistory reports whether that holds. ConsecutiveHistory implies it.
//
// Package state does not depend on it: its Watch relies on every driver's
// History to hold it. The conformance suite (package backendtest) checks
// Watch's order under racing writers for the drivers that promise it.
type OrderedHistory interface {
	OrderedHistory() bool
}
