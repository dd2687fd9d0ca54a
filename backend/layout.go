package backend

import (
	"encoding/json"
	"strconv"
	"time"
)

// This file is the part of package state's record layout that a driver's
// native fast paths (Claimer, Leaser) read and write, and the counters a
// driver may store in pieces: the keys, the run record's value, the lease
// record and the history events they append. Everything else package state
// stores (key-value entries, step outputs, indexes, sessions) is opaque to
// a driver. Package state builds its own layout on this one, so the two
// cannot drift apart.

// Key prefixes of a namespace's records that this file describes.
const (
	// RunPrefix starts the key of every workflow run (RunKey); the value
	// is a RunValue's JSON.
	RunPrefix = "r/"
	// LeasePrefix starts the key of every lease (LeaseKey).
	LeasePrefix = "l/"
	// CounterPrefix starts the key of every counter. A counter holds a
	// decimal integer, and package state writes it only with OpAdd (it
	// reads counters, and may condition a commit on one, as any record). A
	// driver may therefore store a counter in pieces, such as shards that
	// concurrent adders write without waiting for each other, provided
	// that every read, every condition and Reset sees it as one record
	// whose value is the sum.
	CounterPrefix = "n/"
)

// RunKey returns the record key of run id.
func RunKey(id string) string { return RunPrefix + id }

// LeaseKey returns the record key of the lease on resource.
func LeaseKey(resource string) string { return LeasePrefix + resource }

// ClaimedRunsKey is the counter of a namespace's claimed runs (status
// RunClaimed), which a fresh claim of a created run adds one to.
const ClaimedRunsKey = CounterPrefix + "s/" + RunClaimed

// ClaimedChildrenKey returns the counter of parent's claimed children,
// which a fresh claim of a created child of parent adds one to.
func ClaimedChildrenKey(parent string) string {
	return CounterPrefix + "c/" + EscapeID(parent) + "/" + RunClaimed
}

// EscapeID escapes a run id for use as one segment of a key: ASCII
// letters, digits and "-._~" stay, every other byte becomes %XX (upper
// case hex), so that one parent's keys are never a prefix of another's.
func EscapeID(id string) string {
	const hexDigits = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(id)+8), id[:i]...)
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	if b == nil {
		return id
	}
	return string(b)
}

// The statuses of a run as RunValue.Status stores them.
const (
	// RunWaiting is a join parent whose children are not all finished:
	// open, never claimable. Package state moves it to RunCreated in the
	// commit that finishes its last open child.
	RunWaiting = "waiting"
	RunCreated = "created"
	RunClaimed = "claimed"
	RunRunning = "running"
	RunDone    = "done"
	RunFailed  = "failed"
)

// RunValue is the value of a run record: its JSON is what encoding/json
// writes for it (field order included), and DecodeRun reads it. The claim
// is held in the run: AgentID is the holder, ClaimExpiresAt when the claim
// expires and ClaimTTL how far a heartbeat extends it. Fields added later
// go after ClaimTTL, so that the fields a claim changes stay first (see
// RunHead).
type RunValue struct {
	Status   string `json:"status"`
	AgentID  string `json:"agent_id,omitempty"`
	LastStep int64  `json:"last_step"`
	Attempt  int64  `json:"attempt"`
	// Fence counts the run's claims by different holders: a takeover or
	// a fresh claim adds one, a heartbeat keeps it.
	Fence int64 `json:"fence"`
	// UpdatedAt is Unix milliseconds.
	UpdatedAt int64 `json:"updated_at"`
	// ClaimExpiresAt is when the claim of AgentID expires, in Unix
	// milliseconds; 0 when the run has no claim.
	ClaimExpiresAt int64 `json:"claim_expires_at,omitempty"`
	// ClaimTTL is the claim's lifetime in milliseconds: how far a heartbeat
	// (a checkpoint, or the holder claiming again) extends it.
	ClaimTTL int64 `json:"claim_ttl_ms,omitempty"`
	// Parent is the id of the run's parent, or "" for a run without one.
	Parent string `json:"parent_run_id,omitempty"`
	// Join is set on a parent created to join its children.
	Join bool `json:"join,omitempty"`

	Name string            `json:"name"`
	Tags map[string]string `json:"tags"`
	// CreatedAt is Unix milliseconds.
	CreatedAt int64 `json:"created_at"`
}

// RunOpen reports whether status is that of an open run: waiting,
// created, claimed or running.
func RunOpen(status string) bool {
	return status == RunCreated || status == RunClaimed || status == RunRunning || status == RunWaiting
}

// ClaimLive reports whether the run has a live claim at nowMs (Unix
// milliseconds): it is open, has an agent, and its claim expires after
// nowMs.
func (v *RunValue) ClaimLive(nowMs int64) bool {
	return RunOpen(v.Status) && v.AgentID != "" && v.ClaimExpiresAt > nowMs
}

// The ops of the history events the native fast paths append (Event.Op).
const (
	EventClaim        = "workflow.claim"     // a fresh claim
	EventReclaim      = "workflow.reclaim"   // a takeover of an expired claim
	EventHeartbeat    = "workflow.heartbeat" // the holder claiming again
	EventLeaseAcquire = "lease.acquire"
	EventLeaseRenew   = "lease.renew"
	EventLeaseRelease = "lease.release"
	// EventLeaseTakeover is an acquire of a lease whose holder's lease had
	// expired (its record is still there, not swept yet).
	EventLeaseTakeover = "lease.takeover"
)

// RunEvent is the JSON value (and previous value) of a run's history
// event: encoding/json's, in this field order.
type RunEvent struct {
	Status   string `json:"status"`
	AgentID  string `json:"agent_id,omitempty"`
	Attempt  int64  `json:"attempt"`
	Fence    int64  `json:"fence"`
	LastStep int64  `json:"last_step"`
	// Step is set for checkpoints.
	Step *int64 `json:"step,omitempty"`
	// Parent is set on the creation of a child run.
	Parent string `json:"parent_run_id,omitempty"`
}

// RunEventOf returns the JSON of a run's history event for run v, with
// the step of a checkpoint (nil for other events).
func RunEventOf(v *RunValue, step *int64) []byte {
	b, _ := json.Marshal(RunEvent{Status: v.Status, AgentID: v.AgentID, Attempt: v.Attempt,
		Fence: v.Fence, LastStep: v.LastStep, Step: step})
	return b
}

// LeaseEvent is the JSON value (and previous value) of a lease's history
// event: encoding/json's, in this field order.
type LeaseEvent struct {
	Holder    string `json:"holder"`
	Fence     int64  `json:"fence"`
	ExpiresAt int64  `json:"expires_at"` // Unix milliseconds
}

// LeaseEventOf returns the JSON of a lease's history event.
func LeaseEventOf(holder string, fence int64, expires time.Time) []byte {
	b, _ := json.Marshal(LeaseEvent{Holder: holder, Fence: fence, ExpiresAt: unixMs(expires)})
	return b
}

// LeaseValue returns the value of a lease record acquired or renewed for
// ttl: {"ttl_ms":N}, the TTL in whole milliseconds. The record's Writer is
// the holder, its CreateRevision the fence (the revision of the commit that
// began the tenure) and its expiry the lease's.
func LeaseValue(ttl time.Duration) []byte {
	return []byte(`{"ttl_ms":` + strconv.FormatInt(ttl.Milliseconds(), 10) + `}`)
}

// unixMs converts a time to Unix milliseconds; the zero time gives 0.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
