// Package layout says where package state keeps each concept in a driver's
// keyspace and how it encodes the values. The part a driver's native fast
// paths read and write (runs, leases, counters and their history events)
// is published in package backend, for drivers outside this module; this
// package builds the rest (indexes, outputs, entries, sessions) on it and
// names those parts again, so that package state reads one layout.
//
// Keys of one namespace:
//
//	k/<key>                             key-value entry; value is the user's JSON
//	r/<run_id>                          workflow run, its claim included; value is RunValue JSON
//	o/<run_id>/<step, 20 digits>        output of one step; value is the user's JSON
//	n/s/<bucket>                        number of runs in a status bucket (unstarted, running,
//	                                    done, failed) and n/s/claimed of claimed runs (unstarted
//	                                    ones with a claim); values are decimal integers
//	i/a/<order>                         every run
//	i/o/<order>                         open runs: created, claimed or running
//	i/s/<bucket>/<order>                runs by status: unstarted (created or claimed),
//	                                    running, done, failed
//	i/t/<tag key>/<tag value>/<order>   every run by tag (key and value path-escaped)
//	i/ot/<tag key>/<tag value>/<order>  open runs by tag
//	l/<resource_id>                     lease; Writer is the holder, CreateRevision the fence,
//	                                    value {"ttl_ms":N}
//	s/<session_id>                      session snapshot; value is the context JSON
//	m/import/<source>                   how far an import source's history was copied (import.go)
//
// where <order> is Order(created_at, run_id): the run's creation time
// inverted, so that ascending key order is newest first, then its id. Index
// entries have an empty value, no writer and no expiry; only their keys
// matter.
//
// # Runs and claims
//
// A claim lives inside its run: RunValue.AgentID is the holder,
// ClaimExpiresAt (Unix ms) when the claim expires, ClaimTTL (ms) how far a
// heartbeat extends it. The claim is live while the run is open, AgentID is
// set and ClaimExpiresAt is after now. A heartbeat, a takeover and most
// checkpoints therefore write one record, the run, and a history event; a
// fresh claim also adds one to the counter of claimed runs. Every write of a run is a read-modify-write conditioned
// on the run's revision (or under the backend's lock), so the holder check
// of one write cannot interleave with the takeover of another.
//
// Index entries change only when a run is created (every index it belongs
// to), when it starts running (i/s/unstarted/ to i/s/running/), when a
// join parent is released or sent back to waiting (i/s/waiting/ to
// i/s/unstarted/ and back) and when it finishes (out of i/o/, i/ot/,
// i/op/ and its bucket, into i/s/done/ or i/s/failed/). A claim, heartbeat, takeover or release never moves one:
// created and claimed share one status bucket (the run's status field
// tells them apart). A run that stays open keeps its place in i/o/ and
// i/ot/, so a listing that pages through one of them by cursor cannot skip
// it. The counters n/s/ change in the same commit as a run's status
// (backend.OpAdd, so that concurrent writers of different runs never
// conflict on them) and give every status count without a scan: one per
// bucket and one of claimed runs, so that a claim or a release changes one
// counter; created runs are the unstarted ones less the claimed ones.
// Drivers may store a counter (a key under CountPrefix) in pieces as long
// as every read returns it as one record: the PostgreSQL driver adds to one
// of several shard rows under the counter's lock taken shared, so that
// concurrent adders do not commit one at a time, and reads add them up.
//
// A run's value is backend.RunValue's JSON (see backend.RunHead for what
// native claim paths keep of it and how).
//
// This layout replaced, before any release, one that kept a claim in a
// record c/<run_id> of its own and a status index entry per status; runs
// stored in that layout are not read back correctly and are not migrated.
//
// # Parent and child runs
//
// A child run names its parent in RunValue.Parent (parent_run_id, written
// right after claim_ttl_ms and never changed), and a parent created to join
// its children has RunValue.Join set. Keys of a parent's children:
//
//	i/p/<parent>/<order>                every child of the parent
//	i/op/<parent>/<order>               its open children
//	n/c/<parent>/<bucket or claimed>    the number of its children by status bucket, and
//	                                    of claimed ones, kept with backend.OpAdd like n/s/
//
// where <parent> is the parent's id escaped by EscapeID, so that one
// parent's prefix is never a prefix of another's. Every write that moves
// a child between status buckets (or claims or releases it) changes the
// parent's counters in the same commit, exactly as it changes n/s/.
//
// A join parent is stored in status waiting (its own bucket, open, never
// claimable) from its creation until its last open child finishes: the
// commit that finishes that child reads the parent and its counters of
// open children (unstarted, running, waiting) and, when it is the last,
// rewrites the parent to created in the same commit. A native claimer
// therefore only has to refuse a run whose status is waiting.
//
// # Idempotency keys and effects
//
//	d/<idempotency key>                 the run a CreateRun with that key made; value
//	                                    {"run_id":...}, expires after the idempotency window
//	e/<effect key>                      an effect of Store.Once: {"token":...} while a
//	                                    caller runs it (expires with its lease), then
//	                                    {"token":...,"value":...} (expires after the window)
package layout

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"

	"github.com/statesidecar/state/backend"
)

// Key prefixes.
const (
	KVPrefix      = "k/"
	RunPrefix     = backend.RunPrefix
	OutputPrefix  = "o/"
	CountPrefix   = backend.CounterPrefix
	StatusCounts  = "n/s/"
	IndexAll      = "i/a/"
	IndexOpen     = "i/o/"
	IndexStatus   = "i/s/"
	IndexTag      = "i/t/"
	IndexOpenTag  = "i/ot/"
	LeasePrefix   = backend.LeasePrefix
	SessionPrefix = "s/"
	ChildCounts   = "n/c/"
	IndexParent   = "i/p/"
	IndexOpenKids = "i/op/"
	IdemPrefix    = "d/"
	EffectPrefix  = "e/"
)

// The statuses of a run as stored.
const (
	Created = backend.RunCreated
	Claimed = backend.RunClaimed
	Running = backend.RunRunning
	Done    = backend.RunDone
	Failed  = backend.RunFailed
	// Waiting is the status of a join parent whose children are not all
	// finished: open, in a bucket of its own, never claimable.
	Waiting = backend.RunWaiting
)

// Statuses lists every status in lifecycle order.
var Statuses = []string{Waiting, Created, Claimed, Running, Done, Failed}

// Unstarted is the status index bucket of created and claimed runs: a
// claim or a release moves a run between the two without moving it in any
// index.
const Unstarted = "unstarted"

// StatusBucket returns the status index bucket of status.
func StatusBucket(status string) string {
	if status == Created || status == Claimed {
		return Unstarted
	}
	return status
}

// KV returns the record key of a key-value entry.
func KV(key string) string { return KVPrefix + key }

// Run returns the record key of a run.
func Run(id string) string { return backend.RunKey(id) }

// Outputs returns the prefix of a run's step outputs.
func Outputs(id string) string { return OutputPrefix + id + "/" }

// Output returns the record key of one step output.
func Output(id string, step int64) string {
	return fmt.Sprintf("%s%s/%020d", OutputPrefix, id, step)
}

// StepOf parses the step number back out of an output key.
func StepOf(id, key string) (int64, error) {
	return strconv.ParseInt(key[len(Outputs(id)):], 10, 64)
}

// Lease returns the record key of a lease.
func Lease(resource string) string { return backend.LeaseKey(resource) }

// Session returns the record key of a session.
func Session(id string) string { return SessionPrefix + id }

// StatusCount returns the record key of the number of runs in a status
// bucket (see StatusBucket), or of claimed runs for Claimed.
func StatusCount(bucket string) string { return StatusCounts + bucket }

// Buckets lists the status buckets.
var Buckets = []string{Unstarted, Running, Waiting, Done, Failed}

// Counters lists what the run counters count, in a fixed order: each
// status bucket, then claimed runs.
var Counters = []string{Unstarted, Running, Waiting, Done, Failed, Claimed}

// OpenBuckets lists the status buckets of open runs.
var OpenBuckets = []string{Unstarted, Running, Waiting}

// CountDeltas returns the counters a run moving from status from to status
// to changes, and by how much (from "" for a new run).
func CountDeltas(from, to string) map[string]int {
	d := map[string]int{}
	if from != "" && StatusBucket(from) != StatusBucket(to) {
		d[StatusBucket(from)]--
	}
	if from == "" || StatusBucket(from) != StatusBucket(to) {
		d[StatusBucket(to)]++
	}
	if from == Claimed && to != Claimed {
		d[Claimed]--
	}
	if to == Claimed && from != Claimed {
		d[Claimed]++
	}
	return d
}

// StatusIndex returns the prefix of the index of runs in a status bucket
// (see StatusBucket).
func StatusIndex(bucket string) string { return IndexStatus + bucket + "/" }

// TagIndex returns the prefix of the index of every run having one tag pair.
func TagIndex(k, v string) string { return IndexTag + tagPath(k, v) }

// OpenTagIndex returns the prefix of the index of open runs having one tag
// pair.
func OpenTagIndex(k, v string) string { return IndexOpenTag + tagPath(k, v) }

func tagPath(k, v string) string { return url.PathEscape(k) + "/" + url.PathEscape(v) + "/" }

// Order returns the index suffix of a run created at createdMs: ascending
// byte order of suffixes is newest first, ties broken by id.
func Order(createdMs int64, id string) string {
	return fmt.Sprintf("%016x/%s", uint64(math.MaxInt64-createdMs), id)
}

// IDOf returns the run id of an index suffix made by Order.
func IDOf(order string) string {
	if len(order) > 17 && order[16] == '/' {
		return order[17:]
	}
	return ""
}

// Open reports whether status is waiting, created, claimed or running.
func Open(status string) bool { return backend.RunOpen(status) }

// RunValue is the stored form of a run, its claim included (published in
// package backend, for native claim paths).
type RunValue = backend.RunValue

// DecodeRun decodes a stored run (backend.DecodeRun).
func DecodeRun(b []byte) (*RunValue, error) { return backend.DecodeRun(b) }

// RunOrder returns run id's index suffix.
func RunOrder(id string, v *RunValue) string { return Order(v.CreatedAt, id) }

// IndexKeys returns every index key under which run id is listed in its
// current status.
func IndexKeys(id string, v *RunValue) []string {
	o := RunOrder(id, v)
	open := Open(v.Status)
	n := 2 + len(v.Tags)
	if open {
		n += 1 + len(v.Tags)
	}
	keys := make([]string, 0, n)
	keys = append(keys, IndexAll+o, StatusIndex(StatusBucket(v.Status))+o)
	if open {
		keys = append(keys, IndexOpen+o)
	}
	if v.Parent != "" {
		keys = append(keys, ChildIndex(v.Parent)+o)
		if open {
			keys = append(keys, OpenChildIndex(v.Parent)+o)
		}
	}
	for k, val := range v.Tags {
		keys = append(keys, TagIndex(k, val)+o)
		if open {
			keys = append(keys, OpenTagIndex(k, val)+o)
		}
	}
	return keys
}

// RunEvent is the JSON recorded in history for a workflow transition.
type RunEvent = backend.RunEvent

// EventOf summarises a run for history (backend.RunEventOf).
func EventOf(v *RunValue, step *int64) []byte { return backend.RunEventOf(v, step) }

// CreateEventOf summarises a new run for history: EventOf and its parent.
func CreateEventOf(v *RunValue) []byte {
	b, _ := json.Marshal(RunEvent{Status: v.Status, AgentID: v.AgentID, Attempt: v.Attempt,
		Fence: v.Fence, LastStep: v.LastStep, Parent: v.Parent})
	return b
}

// ChildIndex returns the prefix of the index of every child of parent.
func ChildIndex(parent string) string { return IndexParent + EscapeID(parent) + "/" }

// OpenChildIndex returns the prefix of the index of the open children of
// parent.
func OpenChildIndex(parent string) string { return IndexOpenKids + EscapeID(parent) + "/" }

// ChildCount returns the record key of the number of parent's children in
// a status bucket, or of its claimed children for Claimed.
func ChildCount(parent, bucket string) string { return ChildCounts + EscapeID(parent) + "/" + bucket }

// EscapeID escapes a run id for use as one segment of a key
// (backend.EscapeID).
func EscapeID(id string) string { return backend.EscapeID(id) }

// Idem returns the record key of an idempotency key.
func Idem(key string) string { return IdemPrefix + key }

// Effect returns the record key of an effect of Store.Once.
func Effect(key string) string { return EffectPrefix + key }

// LeaseEvent is the JSON recorded in history for a lease transition.
type LeaseEvent = backend.LeaseEvent

// LeaseEventOf encodes a lease for history (backend.LeaseEventOf).
func LeaseEventOf(holder string, fence int64, expires time.Time) []byte {
	return backend.LeaseEventOf(holder, fence, expires)
}

// Ms converts a time to Unix milliseconds; the zero time gives 0.
func Ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// Time converts Unix milliseconds to a UTC time; 0 gives the zero time.
func Time(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
