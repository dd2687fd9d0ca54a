// Package layout says where package state keeps each concept in a driver's
// keyspace and how it encodes the values. It is shared by the root package
// and by drivers that implement native fast paths (a Lua claim must find and
// rewrite the same records the portable code does), so the format is written
// down once.
//
// Keys of one namespace:
//
//	k/<key>                               key-value entry; value is the user's JSON
//	r/<run_id>                            workflow run; value is RunValue JSON
//	c/<run_id>                            live claim on a run; Writer is the holder, value the claim TTL in ms
//	o/<run_id>/<step, 20 digits>          output of one step; value is the user's JSON
//	i/a/<order>                           every run, newest first
//	i/s/<status>/<order>                  runs by status, newest first
//	i/t/<tag key>/<tag value>/<order>     runs by tag, newest first (key and value path-escaped)
//	l/<resource_id>                       lease; Writer is the holder, CreateRevision the fence
//	s/<session_id>                        session snapshot; value is the context JSON
//
// where <order> is RunValue.Order: the run's creation time inverted, so that
// ascending key order is newest first, then its id.
package layout

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"time"
)

// Key prefixes.
const (
	KVPrefix      = "k/"
	RunPrefix     = "r/"
	ClaimPrefix   = "c/"
	OutputPrefix  = "o/"
	IndexAll      = "i/a/"
	IndexStatus   = "i/s/"
	IndexTag      = "i/t/"
	LeasePrefix   = "l/"
	SessionPrefix = "s/"
)

// KV returns the record key of a key-value entry.
func KV(key string) string { return KVPrefix + key }

// Run returns the record key of a run.
func Run(id string) string { return RunPrefix + id }

// Claim returns the record key of a run's claim.
func Claim(id string) string { return ClaimPrefix + id }

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
func Lease(resource string) string { return LeasePrefix + resource }

// Session returns the record key of a session.
func Session(id string) string { return SessionPrefix + id }

// StatusIndex returns the prefix of the index of runs in one status.
func StatusIndex(status string) string { return IndexStatus + status + "/" }

// TagIndex returns the prefix of the index of runs having one tag pair.
func TagIndex(k, v string) string {
	return IndexTag + url.PathEscape(k) + "/" + url.PathEscape(v) + "/"
}

// Order returns the index suffix of a run created at createdMs: ascending
// byte order of suffixes is newest first, ties broken by id.
func Order(createdMs int64, id string) string {
	return fmt.Sprintf("%016x/%s", uint64(math.MaxInt64-createdMs), id)
}

// RunValue is the stored form of a run. A claim's liveness is not stored
// here but in the claim record c/<run_id>.
type RunValue struct {
	Name     string            `json:"name"`
	Tags     map[string]string `json:"tags"`
	Status   string            `json:"status"`
	AgentID  string            `json:"agent_id,omitempty"`
	LastStep int64             `json:"last_step"`
	Attempt  int64             `json:"attempt"`
	Fence    int64             `json:"fence"`
	// CreatedAt and UpdatedAt are Unix milliseconds.
	CreatedAt int64 `json:"created_at"`
	UpdatedAt int64 `json:"updated_at"`
	// Order is the run's index suffix (see Order).
	Order string `json:"order"`
}

// IndexKeys returns every index key under which the run is listed.
func (v *RunValue) IndexKeys(id string) []string {
	keys := make([]string, 0, 2+len(v.Tags))
	keys = append(keys, IndexAll+v.Order, StatusIndex(v.Status)+v.Order)
	for k, val := range v.Tags {
		keys = append(keys, TagIndex(k, val)+v.Order)
	}
	return keys
}

// RunEvent is the JSON recorded in history for a workflow transition.
type RunEvent struct {
	Status   string `json:"status"`
	AgentID  string `json:"agent_id,omitempty"`
	Attempt  int64  `json:"attempt"`
	Fence    int64  `json:"fence"`
	LastStep int64  `json:"last_step"`
	// Step is set for checkpoints.
	Step *int64 `json:"step,omitempty"`
}

// EventOf summarises a run for history.
func EventOf(v *RunValue, step *int64) []byte {
	b, _ := json.Marshal(RunEvent{Status: v.Status, AgentID: v.AgentID, Attempt: v.Attempt,
		Fence: v.Fence, LastStep: v.LastStep, Step: step})
	return b
}

// LeaseEvent is the JSON recorded in history for a lease transition.
type LeaseEvent struct {
	Holder    string `json:"holder"`
	Fence     int64  `json:"fence"`
	ExpiresAt int64  `json:"expires_at"` // Unix milliseconds
}

// LeaseEventOf encodes a lease for history.
func LeaseEventOf(holder string, fence int64, expires time.Time) []byte {
	b, _ := json.Marshal(LeaseEvent{Holder: holder, Fence: fence, ExpiresAt: Ms(expires)})
	return b
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
