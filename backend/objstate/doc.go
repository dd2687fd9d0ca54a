// Package objstate is a backend of package state over an object store:
// one design for S3 (package s3state) and for a directory (package
// filestate), which keeps every promise the other backends keep (one
// winner per claim, fences that never go back, nothing acknowledged lost,
// expiry by one clock) while several processes share one bucket or one
// directory. A Medium is all it needs of the store: read an object (or
// learn cheaply that it did not change), write one unconditionally, only if
// absent or only if its tag is still the one read, delete one, list a
// prefix. It never asks for a conditional delete.
//
// # Layout
//
// Each namespace lives under ns/<namespace>/ (ns/~<hex>/ for a name that
// is not plain) in three kinds of objects, all JSON:
//
//	head.json                the head: the newest commits themselves, one per line, and the
//	                         names of the snapshot and segments that hold everything older
//	seg/<from>-<to>-<id>.json  a segment: commits from..to, never changed once written
//	snap/<pos>-<id>/part-N.jsonl  a snapshot: every record and history event after commit
//	                         pos, one per line, never changed once written
//
// A commit is a group of entries: the Txns of package backend that passed
// their conditions (their writes and events, with every time resolved), and
// maintenance steps (a Reset, a sweep's removals, a history trim, a raised
// revision counter). Applying a commit's entries in order to the state
// after the commit before it gives the same revisions, event ids, creation
// revisions and counter sums in every process: that is how each process
// rebuilds a namespace, and how the leader applies what it wrote.
//
// # A commit
//
// Every process keeps the namespaces it uses in memory, as of the head it
// last read or wrote (its tag remembered). The calls of a namespace queue
// for its leader, a goroutine that runs while calls wait; it takes every
// call queued and builds one commit of them on an overlay of the cache, in
// order, each call seeing the writes of those before it (group commit; a
// Update function runs here, on the records as they then stand, so that a
// claim or a lease is one commit). It then writes the head (the old one
// with the new commit added) conditioned on the tag it last saw:
//
//   - it succeeds: the commit is applied to the cache and every call in it
//     learns its result. One commit costs one conditional PUT, shared by
//     every call waiting at the time; the head carries the newest commits
//     itself, so a commit needs no other object. When the commits in the
//     head exceed Options.TailBytes, the next commit first writes them as a
//     segment (one more PUT, about every hundred small commits).
//   - another process wrote first (the condition failed): the leader reads
//     the new head, applies the commits it lacks (from the head, fetching
//     segments if it fell far behind) and builds the group again on it. A
//     call's conditions are only ever judged against a head that was
//     current when the write conditioned on it succeeded.
//   - the answer was lost (a timeout, a broken connection): the write may
//     have landed. Each commit carries a random id, and each process
//     remembers the ids of a namespace's last 1,024 commits (snapshots keep
//     them too): when the leader next reads the head it looks for its id
//     at the position it wrote at, and reports the commit's results if it
//     is there, builds again if another commit holds that position, and
//     reports the outcome unknown only if the head moved more than 1,024
//     commits on meanwhile.
//
// # Reads: how a reader knows it is current
//
// A read waits for a check that the cache is current: a read of the head
// conditioned on the tag the cache is at (GET If-None-Match on S3,
// answered 304 when nothing changed), begun after the read arrived, which
// serves every read that arrived before it began (one check runs at a
// time; it lets the readers ready to run join it and takes them just
// before it sends, and it does not wait for the leader, which may be
// writing). When the head moved,
// the leader applies the new commits first. So a read sees every commit
// acknowledged before it began, by any process, and costs one cheap request
// shared by all the reads waiting at the time.
//
// # A crashed writer, snapshots, garbage
//
// Only the head says what the namespace holds, and a head is replaced
// whole or not at all. A writer that dies after writing a segment or a
// snapshot but before the head that names it leaves an object no head
// names, which readers never look at (an orphan); a writer that dies with
// a head write in flight either changed the head or did not.
//
// In the background, one job at a time per namespace: when the head names
// Options.MaxSegments segments of one level in a row, they are merged into
// one segment of the next level (so a head names few segments, and a
// commit is rewritten once per level); when the log since the last
// snapshot reaches half that snapshot (Options.SnapshotMinBytes at least),
// the leader freezes its cache (a copy-on-write clone of the key order, at
// once) and writes it as a new snapshot (so writing snapshots costs at most
// about twice writing the log). Either way the leader then has the head
// name the new object instead of those it replaces, by a conditional write
// like any commit's. The objects that
// head no longer names are deleted at once: no head can name them again,
// because every head is written conditioned on the one before it (a writer
// that read an older head fails its condition and reads the new one), and
// a reader that was about to fetch one finds it gone, reads the head again
// and goes on from the snapshot. Nothing is ever created at a name that
// was deleted: segment and snapshot names carry random ids, and the head's
// name is never deleted, so a delayed write cannot bring a deleted object
// back, and deleted records cannot come back with it. Orphans are deleted
// by Sweep once older than Options.OrphanGrace (an hour), by the medium's
// clock, after it has read the head; a writer never names a segment or
// snapshot older than half that grace.
//
// # Time, waiting, history
//
// The driver implements backend.ServerClock with the medium's clock: the
// S3 server's, as estimated from the Date of its answers, or the
// machine's for a directory, so that every process sharing a store judges
// expiry alike. Waiting (Watch, WaitKey, state_wait) polls: package
// state's fallback reads history every WaitPollInterval for the namespaces
// someone waits on, which costs one conditional read of the head while
// nothing changes. Event ids are consecutive per namespace and appear in
// log order (backend.ConsecutiveHistory).
//
// # Costs
//
// A write is one conditional PUT of the head (plus, about every hundred
// commits, one PUT of a segment), whatever the number of calls in its
// group; a read is one conditional GET of the head, answered 304 while
// nothing changed, whatever the number of reads waiting. A process that
// opens a namespace reads its head, snapshot and segments once. Memory is
// the namespaces a process has used, held in full.
package objstate
