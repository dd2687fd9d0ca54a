// Package backend defines the small interface that storage drivers implement.
//
// Application code uses package state; this package is for people writing or
// testing drivers, inside this module or outside it: nothing a driver needs
// is internal. A driver stores records (a key, an opaque value and a few
// fields of metadata) in isolated namespaces and offers five primitives: read
// one or many records, list records by key prefix in byte order, count them,
// apply one atomic conditional multi-key commit, and read the history log.
// Everything the state package promises about key-value entries, workflows,
// leases, sessions and history is built once, in package state, on these
// primitives. Drivers may additionally implement the optional interfaces in
// optional.go to offer faster native paths, and those of notify.go to wake
// waiters without polling; package state falls back to the
// primitives when they are absent. Package backendtest is the conformance
// suite every driver runs from one test function; it runs package state
// over the driver twice, through its fast paths and without them, and
// checks that both write the same records and history, byte for byte.
//
// # What package state promises a driver
//
// Every call comes from package state's one choke point (its gate), which
// traces and observes it, so a driver does not repeat what it guarantees:
//
//   - No method is called after Close has been called, and Close is called
//     once, after every call in flight has returned. A driver need not
//     check that it is open (it may return ErrClosed if it does, and must
//     not corrupt data or panic when misused directly).
//   - No method is called with a context that has already ended. A call
//     whose context ends while it runs must still return promptly, with an
//     error that matches the context's (see Ended).
//   - A commit says what it is (Txn.Intent), so that a driver with a faster
//     path for one kind of commit never infers it from the Txn's shape.
//   - A fast path may decline a call it cannot serve (ErrSkip); package
//     state then serves it with its portable code.
//
// # Record layout
//
// The records a native fast path reads and writes (runs, leases, counters)
// and the history events it appends are described in layout.go: keys
// (RunKey, LeaseKey, ClaimedRunsKey, ClaimedChildrenKey, CounterPrefix),
// values (RunValue, DecodeRun, RunHead with SplitRun and AppendRun,
// LeaseValue) and events (RunEventOf, LeaseEventOf and the Event* ops).
// Everything else package state stores is opaque to a driver, except that
// keys under CounterPrefix are counters, which a driver may store in
// pieces.
//
// # Changes for drivers written against earlier versions
//
// Txn.Intent is new (a Set is IntentSet; drivers used to recognise its
// shape). The layout above moved here from the module's internal/layout,
// which Claimer's documentation used to point at. ErrSkip is new. Drivers
// no longer need to check that they are open or that a call's context is
// live, and the conformance suite no longer asks them to. The deprecated
// ClaimResult.Claim is gone. Package backendtest compares a driver's fast
// paths with the portable code, byte for byte (its Driver cases
// FastPathsWriteWhatThePortableCodeWrites and
// SetIntentWritesWhatAGenericCommitWrites). CHANGELOG.md lists the same
// under "Drivers".
//
// # Time
//
// Drivers never decide what "now" is on their own except when told to: every
// call carries a now. A zero now means "use your own clock", which a driver
// shared by several processes (Redis, PostgreSQL) interprets as the server's
// clock so that every process agrees on expiry; embedded drivers use the
// process clock. A record is live at now when it has no expiry or its expiry
// is strictly after now: a record whose ExpiresAt equals now is expired. All
// times are handled with millisecond precision.
//
// # Revisions
//
// Every successful commit that writes anything gets a new revision, strictly
// greater than every earlier revision of the namespace, and shared by every
// record the commit writes. Revisions are never reused, not even after a
// namespace is reset, so they can serve as fencing tokens.
//
// Revisions and event IDs count per namespace: a commit in one namespace
// must not change the revisions or event IDs another namespace is given, so
// that a tenant cannot watch another's write rate through its versions,
// fences or history ids.
package backend

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned by Driver.Get when the key is absent or expired.
var ErrNotFound = errors.New("not found")

// ErrClosed is the error of a call to a closed store. Package state never
// calls a driver after Close; a driver may still return ErrClosed (or an
// error wrapping it) when it is used directly after Close.
var ErrClosed = errors.New("store is closed")

// ErrSkip may be returned by the methods of the optional fast-path
// interfaces (Claimer, Leaser), having changed nothing, when the driver
// cannot serve that one call natively, such as a claim of a run stored by
// an earlier version in a form its script does not read. Package state
// then serves the call with its portable code, as if the interface were
// absent. (database/sql's driver.ErrSkip is the model.)
var ErrSkip = errors.New("backend: fast path skipped")

// ErrUnavailable is wrapped by the error of a call that gave up waiting for
// the backend within the driver's bound, such as a write behind another
// process's lock on a SQLite file. Nothing was written; try again later.
var ErrUnavailable = errors.New("backend unavailable: busy")

// Driver is a storage backend. Its methods must be safe for concurrent use.
// Failed conditions are results, not errors; errors mean the driver could not
// do what was asked (I/O failure, a context that ended during the call) and
// must wrap the cause with %w so that errors.Is works on it. Package state
// calls no method after Close and none with an ended context (see the
// package documentation).
type Driver interface {
	// Name returns the backend's short name, such as "sqlite" or "redis".
	Name() string

	// Get returns the record at key if it is live at now, or ErrNotFound.
	Get(ctx context.Context, ns, key string, now time.Time) (Record, error)

	// GetMany returns one record per key, in the order of q.Keys. An absent
	// key gives a Record with only Key set (Revision 0). Expired records are
	// reported as absent unless q.IncludeExpired is set, in which case they are
	// returned with Expired set.
	GetMany(ctx context.Context, q *GetQuery) ([]Record, error)

	// List returns the live records whose keys start with q.Prefix and sort
	// strictly after q.After, in ascending byte order of key, at most q.Limit
	// of them. The prefix is literal: no byte has a special meaning.
	List(ctx context.Context, q *ListQuery) ([]Record, error)

	// Count returns, for each prefix of q.Prefixes, the number of live records
	// whose keys start with it, and the number of history events of q.NS.
	Count(ctx context.Context, q *CountQuery) (Counts, error)

	// Commit checks every Cond of txn.If at txn.Now and, only if all hold,
	// applies every Op of txn.Then in order and appends txn.Events, all
	// atomically: either everything is applied or nothing is. A failed
	// condition returns Result{Committed: false} and a nil error.
	Commit(ctx context.Context, txn *Txn) (Result, error)

	// History returns events of q.NS newest first: those with ID < q.Before
	// (all when Before is 0) and, when q.Key is set, only those with that key.
	History(ctx context.Context, q *HistoryQuery) ([]Event, error)

	// Reset deletes every record and event of q.NS in one atomic step. It
	// does not reset the namespace's revision counter or event IDs.
	Reset(ctx context.Context, q *ResetQuery) (ResetResult, error)

	// Close releases the driver's resources. Package state calls it once,
	// after every other call has returned, and calls nothing after it.
	Close() error
}

// Record is one stored item.
type Record struct {
	// Key is the record's key within its namespace.
	Key string
	// Value is the stored bytes, opaque to the driver.
	Value []byte
	// Writer identifies who wrote the record last (an agent id), or "".
	Writer string
	// Revision is the revision of the commit that last wrote the record;
	// 0 means the record is absent.
	Revision int64
	// CreateRevision is the revision at which the record was last created:
	// a Put on an absent or expired key sets it to the commit's revision, a
	// Put on a live key keeps it.
	CreateRevision int64
	// UpdatedAt is the time given by the Op that last wrote the record.
	UpdatedAt time.Time
	// ExpiresAt is when the record expires; zero means never.
	ExpiresAt time.Time
	// Expired is set by GetMany with IncludeExpired for records that are
	// present but no longer live.
	Expired bool
}

// Found reports whether the record is present (live, or expired but
// included on request).
func (r Record) Found() bool { return r.Revision != 0 }

// Live reports whether the record is present and not expired.
func (r Record) Live() bool { return r.Revision != 0 && !r.Expired }

// GetQuery asks GetMany for several records.
type GetQuery struct {
	NS             string
	Keys           []string
	Now            time.Time
	IncludeExpired bool
}

// ListQuery asks List for a page of records.
type ListQuery struct {
	NS     string
	Prefix string
	// After is an exclusive lower bound on keys; "" starts at the prefix.
	After string
	// Limit is the maximum number of records; it is always positive.
	Limit int
	Now   time.Time
	// KeysOnly asks for keys: the caller reads only each record's Key, and
	// the driver may leave the other fields empty.
	KeysOnly bool
}

// CountQuery asks Count for the number of live records under each prefix.
type CountQuery struct {
	NS       string
	Prefixes []string
	Now      time.Time
}

// Counts is the answer to a CountQuery.
type Counts struct {
	// Prefixes holds one count per CountQuery prefix, in order.
	Prefixes []int64
	// Events is the number of history events stored for the namespace.
	Events int64
}

// OpKind says what an Op does.
type OpKind uint8

// The kinds of Op.
const (
	// OpPut writes a record.
	OpPut OpKind = iota + 1
	// OpDelete removes a record; deleting an absent key is not an error.
	OpDelete
	// OpAdd adds the decimal integer in Value to the decimal integer the
	// record holds (an absent or expired record, or a value that is not a
	// decimal integer, counts as 0) and stores the sum in decimal, with
	// Writer, TTL and Time as OpPut would. It keeps counters without
	// conditioning a commit on them, so that writers of different records
	// that bump the same counter never conflict.
	OpAdd
)

// Op is one write of a commit.
type Op struct {
	Kind OpKind
	Key  string
	// Value is the record's new value (OpPut) or the decimal integer to add
	// (OpAdd).
	Value []byte
	// Writer is stored as Record.Writer.
	Writer string
	// TTL makes the record expire TTL after the commit's now; 0 means never.
	TTL time.Duration
	// Time is stored as Record.UpdatedAt.
	Time time.Time
}

// Cond is a condition on one key, checked at the commit's now.
type Cond struct {
	Key string
	// Revision is the revision the key's live record must have; 0 means the
	// key must be absent or expired.
	Revision int64
}

// Intent says what a commit is, so that a driver with a faster path for
// one kind of commit can take it without inferring the kind from the
// Txn's shape. A driver may ignore it: every Txn, whatever its Intent,
// means exactly what its conditions, ops and events say.
type Intent uint8

// The intents of a commit.
const (
	// IntentAny is a commit package state says nothing more of.
	IntentAny Intent = iota
	// IntentSet is a key-value set (state.Store.Set): exactly one OpPut
	// and one Event of it, whose Value and Writer are the Op's, whose
	// PrevOf is the Op's Key, and whose Prev and Time are unset (the
	// previous value and the commit's now); at most one Cond, on the Op's
	// Key. Event.Key is the entry's key, which is not the record's.
	IntentSet
)

// Txn is an atomic conditional commit.
type Txn struct {
	NS string
	// Now is the time conditions and TTLs are evaluated at; zero means the
	// driver's own clock.
	Now time.Time
	// Intent says what the commit is (IntentAny unless package state says
	// more); its If, Then and Events are those the Intent describes.
	Intent Intent
	If     []Cond
	Then   []Op
	Events []Event
}

// Result is the outcome of a Commit.
type Result struct {
	// Committed is false when a condition failed; nothing was applied then.
	Committed bool
	// Revision is the commit's revision when it committed and wrote
	// something (0 for a commit with no Ops).
	Revision int64
	// Failed is the index in Txn.If of the first failed condition, or -1.
	Failed int
	// Current is the live revision of the failed condition's key (0 if absent
	// or expired).
	Current int64
	// Now is the time the commit was evaluated at (Txn.Now when it was set).
	Now time.Time
}

// Event is one entry of the history log.
type Event struct {
	// ID is assigned by the driver when the event is appended; IDs increase
	// in append order and are never reused within a namespace.
	ID int64
	// Revision is the revision of the commit that appended the event.
	Revision int64
	Key      string
	Op       string
	// Value is the new value (JSON), or nil.
	Value []byte
	// Prev is the previous value (JSON), or nil.
	Prev []byte
	// PrevOf, when set on an event being committed, asks the driver to fill
	// Prev with the value of that record if it is live before the commit's
	// Ops are applied. It is not stored.
	PrevOf string
	Writer string
	// Time is when the event happened; a zero Time on an event being
	// committed is replaced by the commit's now.
	Time time.Time
}

// HistoryQuery asks History for events, newest first.
type HistoryQuery struct {
	NS string
	// Key restricts the answer to events of one key; "" means all.
	Key string
	// Before is an exclusive upper bound on event IDs; 0 means none.
	Before int64
	// Limit is the maximum number of events; it is always positive.
	Limit int
}

// ResetQuery asks Reset to wipe a namespace.
type ResetQuery struct {
	NS string
	// CountPrefixes lists the key prefixes whose deleted records are counted
	// in ResetResult.Records; records under other prefixes are deleted too but
	// not counted.
	CountPrefixes []string
}

// ResetResult reports what Reset deleted.
type ResetResult struct {
	// Records is the number of deleted records under ResetQuery.CountPrefixes,
	// expired ones included.
	Records int64
	// Events is the number of deleted history events.
	Events int64
}
