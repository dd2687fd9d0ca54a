// Package state gives AI agents durable coordination state outside their own
// processes: agents crash, get recycled and scale out, and their work must
// not be lost or done twice.
//
// A [Store] offers key-value entries with TTLs and versions, a registry of
// workflow runs with atomic claims, checkpoints and crash recovery, leases
// with fencing tokens, session snapshots, an audit history and health, over
// pluggable backends: SQLite (embedded, the default), Redis and PostgreSQL
// (several processes sharing one server) and memory (tests, ephemeral use).
//
// # Concepts
//
// Key-value entries ([Store.Set], [Store.Get], [Store.Delete], [Store.List])
// hold any JSON value. Every write gets a version greater than any the key
// had before: the namespace's revision at that write, not a count of the
// key's writes (revisions, and so versions and fences, count per namespace).
// [IfVersion] turns a write into a compare-and-set. [WithTTL] makes an entry
// expire. Each method takes only the options it honours, and the compiler
// checks it: Set takes [SetOption]s, which WithTTL and IfVersion are and
// [WithFence] is not.
//
// A workflow run ([Store.CreateRun]) moves through created → claimed →
// running → done | failed (a join parent starts waiting, see below).
// [Store.ClaimRun] is atomic: of any number of racing claimers exactly one
// wins. A claim expires unless the holder sends
// heartbeats (claiming again, or any [Store.CheckpointRun]); once it has
// expired any agent may claim the run again, with a higher attempt and fence,
// and resume from its last checkpoint ([Store.ResumeRun]). Passing the fence
// back with [WithFence] makes a stale worker's checkpoint, completion or
// failure fail with [ErrNotHeld] instead of overwriting its successor's or
// being told it succeeded. [WithAgent] checks the holder's id instead, which
// cannot tell the holder from an agent that restarted and reuses its id:
// only the fence protects against that.
//
// # Coordination patterns
//
// Fan-out and fan-in: a run created [WithParent] is a child of an open
// run; [RunQuery].ParentID discovers a parent's children and [Store.GetRun]
// counts them by status ([Run].Children). A parent created [WithJoin]
// waits ([StatusWaiting], refused by ClaimRun with [ErrWaiting]) until it
// has children and every one of them is done or failed; the write that
// finishes the last one makes the parent created, so that exactly one
// aggregator claims it.
//
// Retries: [WithIdempotencyKey] makes a retried CreateRun return the run
// the first call made ([Run].Replayed) for [Options].IdempotencyWindow.
// [Store.Once] is an effect ledger: the first caller runs a side effect
// and records its result, later and concurrent callers get the recorded
// result; a caller that dies mid-effect loses its lease and a later caller
// runs the effect again (at-least-once execution, exactly-once recording).
//
// A lease ([Store.TryAcquireLease], [Store.AcquireLease],
// [Store.RenewLease], [Store.ReleaseLease], [Store.KeepAlive]) is an
// exclusive lock that expires.
// Its fencing token never decreases for a resource. A keep-alive renews it in
// the background and stops, at the latest, at the lease's expiry.
//
// Sessions ([Store.SetSession], [Store.GetSession]) keep snapshots of
// conversational context. [Store.History] is the audit log of every state
// transition; it is kept within its count limit as it is written, and
// trimmed by age when swept ([Options]). [Store.Health]
// counts what a namespace holds; [Store.Reset] wipes it.
//
// Waiting for change needs no polling loop: [Store.WaitKey] returns once
// an entry is newer than a version, [Store.WaitRun] once a run reaches a
// status, and [Store.Watch] yields the history events after a position, in
// order and without gaps, resumable after a break. A store follows each
// namespace someone waits on with one history reader, woken by the store's
// own writes at once and by other processes' writes through the backend
// (SQLite's data_version, Redis pub/sub; a poll every
// Options.WaitPollInterval where the backend cannot tell), so a thousand
// waiters cost the backend what one does.
//
// [Store.Namespace] narrows a store: everything is isolated per namespace.
// [Store.StateTool] exposes the seven operations of the McpStateTool
// interface that agent frameworks define.
//
// # Names
//
// The Store's methods are named by one rule. A method is a verb, and a verb
// means the same in every kind of record: Get reads one record by its id
// (an error matching ErrNotFound when there is none), Set writes one whole,
// Delete removes one and reports whether it was live, List pages through
// every record of a kind, Create makes one under an id the store picks.
// Key-value entries, the store's plain records, take the bare verb (Set,
// Get, Exists, Delete, List, SetMany, GetMany, Update); every other kind
// of record is named after the verb: Run, Lease, Session (GetRun,
// GetLease, GetSession; ListRuns; SetSession, DeleteSession). A kind's own
// verbs are named the same way: a run is created, discovered, claimed,
// checkpointed, resumed, completed, failed and released (ClaimRun,
// CheckpointRun, ReleaseRun); a lease is acquired, without waiting or
// waiting, renewed and released (TryAcquireLease, AcquireLease, RenewLease,
// ReleaseLease). The waits name what they wait on (WaitKey, WaitRun), and
// imports what they import (ImportEntries, ImportRun). Methods about the
// store as a whole are a bare verb (Ping, Reset, Sweep, Close, Watch, Once)
// or are named after what they return (Health, History, Namespace,
// StateTool, KeepAlive). Per-call options are named after the verb of the
// methods that take them (SetOption, CheckpointOption), and the option a
// constructor returns after the option (WithFence returns a FenceOption).
//
// # Backends and URLs
//
// Open a store with [New] and a driver, or with [Open] and a URL after
// blank-importing the backend's package:
//
//	mem://                          backend/memstate: memory (the same name gives the same store)
//	sqlite:///abs/path/state.db     backend/sqlitestate: SQLite file (WAL)
//	sqlite:relative/state.db
//	redis://host:6379/0             backend/redisstate: Redis (rediss:// for TLS)
//	postgres://user@host:5432/db    backend/pgstate: PostgreSQL (postgresql:// too; ?schema=)
//
// A "namespace" query parameter selects the namespace. Every backend passes
// the same conformance suite, backend/backendtest.
//
// # Encryption at rest and erasure
//
// With [Options].Encryption (package encryption makes one from a key URL)
// the values, step outputs, session contexts, effect results and history
// payloads are sealed before any backend sees them, with a data key set per
// namespace bound to namespace and key, failing closed on plaintext
// ([ErrNotEncrypted]); keys, ids, tags, statuses and times stay in clear.
// [Store.RotateKey], [Store.Reencrypt], [Store.RetireKey] and [Store.Keys]
// manage a namespace's keys. [Store.EraseNamespace] and [Store.EraseSubject]
// (for writes tagged [WithSubject] or [ContextWithSubject]) erase on request
// and destroy the keys, leaving a tombstone in history. docs/encryption.md
// says exactly what is and is not encrypted, and the residual risks.
//
// # Errors
//
// Every error is an [*Error] naming the operation and key, wrapping a
// sentinel ([ErrNotFound], [ErrConflict], [ErrLeaseHeld], [ErrNotHeld],
// [ErrClaimed], [ErrFinished], [ErrWaiting], [ErrParentNotFound],
// [ErrParentFinished], [ErrInvalid], [ErrClosed], [ErrUnavailable]) or the
// backend's or context's error. Branch with errors.Is; read details
// ([*FieldError], [*ConflictError], [*HeldError], [*ClaimError],
// [*ParentError], [*NotHeldError], [*LeaseExpiredError]) with errors.As. Bad input never changes anything stored.
//
// # Time and TTL
//
// Times have millisecond precision: a TTL that is not a whole number of
// milliseconds is rounded up. A record whose expiry equals now is expired.
// One clock decides expiry for a store: the process clock for embedded
// backends, and the server's clock for Redis and PostgreSQL, so that
// processes on hosts with skewed clocks still agree. [Options].Clock
// injects a clock (see package statetest), which tests use to move time
// without sleeping. Expired records are invisible at once and removed in the
// background ([Store.Sweep]).
//
// # Concurrency
//
// A Store is safe for concurrent use, by any number of goroutines and, on
// SQLite, Redis and PostgreSQL, by any number of processes sharing the
// backend. Writes are atomic; claims and leases have exactly one winner. No
// call waits on a backend without limit: a busy backend fails a call with
// [ErrUnavailable] after its bound (SQLite's lock timeout), and
// [Store.Close] cancels background work. Leases and claims are only as safe
// as their TTLs: a holder paused past its expiry may still believe it holds
// the lease, which is why fences exist. Give the fence to whatever you
// protect and let it refuse smaller ones.
package state
