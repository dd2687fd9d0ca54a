package mcptasks

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// The statuses of a task, the same in both protocol eras.
const (
	StatusWorking       = "working"
	StatusInputRequired = "input_required"
	StatusCompleted     = "completed"
	StatusFailed        = "failed"
	StatusCancelled     = "cancelled"
)

// terminal reports whether a task in status s is finished for good.
func terminal(s string) bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// An Owner is who a task belongs to: the authentication context of the
// request that created it. Only the same owner sees the task; for everyone
// else it does not exist.
type Owner struct {
	// Namespace is the store namespace the caller works in (the bearer
	// token's namespace in the sidecar).
	Namespace string `json:"ns"`
	// Principal identifies the caller within the namespace (a token, an
	// OAuth subject); "" when the server knows none.
	Principal string `json:"principal,omitempty"`
}

// key is a fixed-length name for the owner, usable in a record key whatever
// characters the namespace and principal hold.
func (o Owner) key() string {
	h := sha256.Sum256([]byte(o.Namespace + "\x00" + o.Principal))
	return hex.EncodeToString(h[:16])
}

// record is a task as stored under taskKey: everything tasks/get answers
// from, and what a worker needs to run the call again.
type record struct {
	ID    string `json:"id"`
	Owner Owner  `json:"owner"`
	// Version is the protocol version of the request that created the task:
	// the call is run again as that version's client would have sent it.
	Version string `json:"version"`
	Tool    string `json:"tool"`
	// Params are the tools/call params as the client sent them.
	Params json.RawMessage `json:"params"`
	// Run is the workflow run whose claim the execution runs under.
	Run string `json:"run"`

	Status    string `json:"status"`
	Message   string `json:"message,omitempty"`
	CreatedMs int64  `json:"created_ms"`
	UpdatedMs int64  `json:"updated_ms"`
	TTLMs     int64  `json:"ttl_ms"`
	PollMs    int64  `json:"poll_ms"`

	// Result is the tools/call result (completed); Error the JSON-RPC error
	// object (failed).
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Fence is the greatest claim fence that wrote the record: a worker with
	// a smaller one lost its claim and may write nothing more.
	Fence int64 `json:"fence,omitempty"`
	// Attempt is the attempt of that worker's claim.
	Attempt int64 `json:"attempt,omitempty"`
	// Input holds the requests of an input_required round and the answers
	// given so far; Rounds counts the rounds there were.
	Input  *inputRound `json:"input,omitempty"`
	Rounds int         `json:"rounds,omitempty"`
}

// An inputRound is one round of requests to the client (2026-07-28
// inputRequests), under keys prefixed with the round's number so that no
// key is used twice over the task's life.
type inputRound struct {
	Round     int                        `json:"round"`
	Requests  map[string]json.RawMessage `json:"requests"`
	Responses map[string]json.RawMessage `json:"responses,omitempty"`
	// State is the handler's requestState, passed back with the answers.
	State string `json:"state,omitempty"`
	// Keys maps a prefixed key to the handler's own key.
	Keys map[string]string `json:"keys"`
}

// answered reports whether every request of the round has an answer.
func (r *inputRound) answered() bool {
	for k := range r.Requests {
		if _, ok := r.Responses[k]; !ok {
			return false
		}
	}
	return true
}

// expiresAt is when the task expires.
func (r *record) expiresAt() time.Time { return time.UnixMilli(r.CreatedMs + r.TTLMs) }

// ttlLeft is how long the record still lives at now; not positive once it
// has expired.
func (r *record) ttlLeft(now time.Time) time.Duration {
	return r.expiresAt().Sub(now)
}

func decodeRecord(b []byte) (*record, error) {
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("stored task is corrupt: %w", err)
	}
	return &r, nil
}

// Keys in the task namespace. A task's record, its last checkpoint and its
// entry in its owner's listing all expire with the task; the owner's count
// of live tasks expires with the last of them.
func taskKey(id string) string       { return "t/" + id }
func checkpointKey(id string) string { return "c/" + id }
func liveKey(o Owner) string         { return "n/" + o.key() }
func listPrefix(o Owner) string      { return "o/" + o.key() + "/" }

// listKey orders an owner's tasks newest first.
func listKey(o Owner, createdMs int64, id string) string {
	return fmt.Sprintf("%s%016x/%s", listPrefix(o), math.MaxInt64-createdMs, id)
}

// idFromListKey returns the task id at the end of a listing key.
func idFromListKey(k string) string { return k[strings.LastIndexByte(k, '/')+1:] }

// idEncoding writes ids in lowercase base32: letters and digits only, safe
// in an HTTP header (Mcp-Name) and in a store key.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// idBytes is the randomness of a task id: 160 bits from crypto/rand, so
// that an id cannot be guessed (the 2026-07-28 text allows ids to serve as
// bearer tokens).
const idBytes = 20

// newID returns a fresh task id.
func newID() string {
	var b [idBytes]byte
	_, _ = rand.Read(b[:])
	return idEncoding.EncodeToString(b[:])
}

// validID reports whether id can be one this package made: anything else is
// not looked up at all.
func validID(id string) bool {
	if len(id) != idEncoding.EncodedLen(idBytes) {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// liveSet is the value under liveKey: the owner's tasks that are not
// finished, each with its expiry (Unix ms), so that a task that expired
// unfinished stops counting.
type liveSet struct {
	Tasks map[string]int64 `json:"tasks"`
}

// prune drops the tasks expired at nowMs and returns the latest expiry
// left (0 when none is).
func (l *liveSet) prune(nowMs int64) int64 {
	var last int64
	for id, exp := range l.Tasks {
		if exp <= nowMs {
			delete(l.Tasks, id)
			continue
		}
		last = max(last, exp)
	}
	return last
}
