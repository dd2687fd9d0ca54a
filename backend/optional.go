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
	// Events are taken oldest first by ID, so a driver may stop at the first
	// event that is young enough even if later ones (appended with an older
	// Time) are not.
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

// HistoryTrimmer is implemented by drivers that can remove the oldest
// events of one namespace beyond a count cheaply, in time proportional to
// what they remove (not to what the namespace holds). Package state calls it
// as history is written, every few events, so that history stays within
// its limit between sweeps.
//
// TrimHistory removes the oldest events of q.NS so that at most q.Keep of
// the newest remain, at most q.Limit of them per call (reporting More when
// it stopped at the limit). It must not change any event id.
//
// Fallback: history is trimmed only by Sweeper, every sweep interval.
type HistoryTrimmer interface {
	TrimHistory(ctx context.Context, q *TrimQuery) (TrimResult, error)
}

// TrimQuery asks a HistoryTrimmer to trim one namespace's history.
type TrimQuery struct {
	NS string
	// Keep is how many of the newest events to keep; it is positive.
	Keep int64
	// Limit caps the events removed by one call; it is positive.
	Limit int
}

// TrimResult reports what one TrimHistory call removed.
type TrimResult struct {
	Events int64
	// More is set when the limit was reached and more events are over.
	More bool
}

// Pinger is implemented by drivers that can tell cheaply whether they can
// serve writes now, such as whether a database's write lock can be had
// within a short bound. Ping returns nil when they can, and otherwise an
// error (matching ErrUnavailable when the backend is busy).
//
// Fallback: package state reads one absent record, which tells that the
// backend answers reads, not that it can write.
type Pinger interface {
	Ping(ctx context.Context) error
}

// ConfigChecker is implemented by drivers of servers whose configuration
// can weaken what package state promises, such as Redis without persistence
// or with an eviction policy that may drop keys. CheckConfig returns one
// warning per problem it finds, each saying what is at risk and how to fix
// it; package state logs them when a store starts. A server that will not
// say (a managed service that hides its configuration) gives no warning.
type ConfigChecker interface {
	CheckConfig(ctx context.Context) ([]string, error)
}

// ServerClock is implemented by drivers shared by several processes whose
// server has a clock of its own. When a store has no injected clock, package
// state passes a zero now to such a driver so that the server decides expiry,
// and uses ServerTime to keep the timestamps it writes close to the server's.
type ServerClock interface {
	ServerTime(ctx context.Context) (time.Time, error)
}

// Claimer is implemented by drivers that claim a workflow run in one round
// trip, such as a Lua script in Redis. ClaimRun follows exactly the rules
// of state.Store.ClaimRun, on the records of layout.go, and writes what
// package state's portable claim writes (package backendtest checks it,
// byte for byte):
//
//   - The run record is RunKey(q.RunID); its value is a RunValue. An absent
//     or expired run is ClaimNotFound; a run in status RunDone, RunFailed
//     or any status that is not open is ClaimFinished; a run in status
//     RunWaiting (a join parent whose children are not all finished) is
//     ClaimWaiting. None of them writes anything.
//   - A live claim (RunValue.ClaimLive at now) of another agent is
//     ClaimHeld, writing nothing. The holder's own live claim is renewed
//     (ClaimRenewed, a heartbeat): ClaimExpiresAt becomes now+TTL and
//     ClaimTTL the TTL in milliseconds, nothing else changes (not even
//     UpdatedAt), and the event is EventHeartbeat with the run's
//     RunEventOf as it was as its value and no previous value.
//   - Otherwise the claim is acquired (ClaimAcquired): AgentID becomes
//     q.AgentID, Attempt and Fence go up by one, UpdatedAt becomes now,
//     ClaimExpiresAt and ClaimTTL as for a heartbeat, and a created run
//     becomes claimed (a claimed or running one keeps its status). The
//     event is EventClaim, or EventReclaim when the run had an agent
//     (whose claim expired; ClaimResult.Reclaimed is then set), with the
//     new run's RunEventOf as its value and the old one's as its previous
//     value. When a created run becomes claimed, ClaimedRunsKey goes up by
//     one (OpAdd's rules), and so does ClaimedChildrenKey(parent) for a
//     child run, in the same atomic step.
//   - The run record is written as a commit writes it: a new revision, its
//     create revision kept, no writer, UpdatedAt (of the record) now, no
//     expiry. The event's Key is q.RunID, its Writer q.Writer (q.AgentID
//     when q.Writer is empty); the run's AgentID is q.AgentID whatever
//     q.Writer is.
//
// A Claimer may return ErrSkip for a run it cannot claim natively (one it
// stored in an earlier form, say, or a q.Writer it cannot record); package
// state then claims it with its portable code.
//
// Fallback: package state reads the run and commits under a condition on
// its revision (natively atomic with an Updater).
type Claimer interface {
	ClaimRun(ctx context.Context, q *ClaimQuery) (ClaimResult, error)
}

// ClaimQuery asks a Claimer to claim a run.
type ClaimQuery struct {
	NS string
	// Now is when the claim happens; zero means the driver's clock.
	Now     time.Time
	RunID   string
	AgentID string
	// TTL is how long the claim lives without a heartbeat; it is positive.
	TTL time.Duration
	// Writer is the history writer of the event this call appends (package
	// state's agent id joined with an authenticated principal); empty
	// means AgentID. It changes nothing but the event's Writer.
	Writer string
}

// ClaimOutcome says how a claim ended.
type ClaimOutcome int

// The outcomes of a claim.
const (
	// ClaimNotFound: the run does not exist.
	ClaimNotFound ClaimOutcome = iota + 1
	// ClaimFinished: the run is done or failed.
	ClaimFinished
	// ClaimHeld: another agent holds a live claim (named in the run).
	ClaimHeld
	// ClaimAcquired: the agent claimed the run (a fresh claim or a takeover).
	ClaimAcquired
	// ClaimRenewed: the agent already held the claim and extended it.
	ClaimRenewed
	// ClaimWaiting: the run is a join parent waiting for its children
	// (status "waiting"); nothing was written.
	ClaimWaiting
)

// ClaimResult is the outcome of a ClaimRun.
type ClaimResult struct {
	Outcome ClaimOutcome
	// Run is the run record: as written when the claim succeeded, as read
	// otherwise (absent for ClaimNotFound). The run holds its claim.
	Run Record
	// Reclaimed is set when the claim took over from an expired holder.
	Reclaimed bool
	// Now is the time the claim was evaluated at.
	Now time.Time
}

// Leaser is implemented by drivers that acquire, renew and release leases
// in one round trip each. Lease follows exactly the rules of
// state.Store.TryAcquireLease, RenewLease and ReleaseLease, on the lease
// record LeaseKey(q.Resource), and writes what package state's portable
// code writes (package backendtest checks it, byte for byte):
//
//   - The lease record's Writer is the holder, its CreateRevision the
//     fence (the revision of the commit that began the tenure), its expiry
//     the lease's and its value LeaseValue(TTL). A lease is held while its
//     record is live.
//   - Acquire succeeds when the lease is free, expired, or the holder's own
//     (which extends it, keeping the fence); renew and release need the
//     holder's own live lease. A refusal writes nothing and returns the
//     live lease that prevented it, if any.
//   - Acquire and renew put the record (a new tenure: a new create
//     revision) with TTL q.TTL; release deletes it. The event's Key is
//     q.Resource, its Writer q.Writer (the holder when q.Writer is empty:
//     the record's Writer is the holder whatever q.Writer is), its op EventLeaseAcquire,
//     EventLeaseRenew, EventLeaseRelease, or EventLeaseTakeover for an
//     acquire of a lease whose record is present but expired and held by
//     another (LeaseResult.Takeover). Its value is LeaseEventOf the lease
//     after the action (none for a release; fence 0 for a new tenure:
//     package state fills it in with the event's revision when it reads
//     it), its previous value LeaseEventOf the lease before it when the
//     lease was live or taken over.
//
// A Leaser may return ErrSkip, having changed nothing (for a q.Writer it
// cannot record, say); package state then serves the call with its
// portable code.
//
// Fallback: package state reads the lease and commits under a condition
// (natively atomic with an Updater).
type Leaser interface {
	Lease(ctx context.Context, q *LeaseQuery) (LeaseResult, error)
}

// LeaseAction says what a LeaseQuery does.
type LeaseAction int

// The lease actions.
const (
	LeaseAcquire LeaseAction = iota + 1
	LeaseRenew
	LeaseRelease
)

// LeaseQuery asks a Leaser to act on a lease.
type LeaseQuery struct {
	NS string
	// Now is when the action happens; zero means the driver's clock.
	Now      time.Time
	Action   LeaseAction
	Resource string
	Holder   string
	// TTL is the lease's new lifetime (acquire, renew); it is positive.
	TTL time.Duration
	// Writer is the history writer of the event this call appends (package
	// state's holder id joined with an authenticated principal); empty
	// means Holder. It changes nothing but the event's Writer.
	Writer string
}

// LeaseResult is the outcome of a Lease call.
type LeaseResult struct {
	// OK is set when the lease was acquired, renewed or released.
	OK bool
	// Takeover is set when an acquire replaced another holder's expired
	// lease.
	Takeover bool
	// Lease is the lease record after the action when OK (for a release, as
	// it was before); otherwise the live lease that prevented it, if any.
	Lease Record
	// Now is the time the action was evaluated at.
	Now time.Time
}
