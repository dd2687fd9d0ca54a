package state

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// History page sizes.
const (
	DefaultHistoryLimit = 10
	MaxHistoryLimit     = 1000
)

// An Event is one entry of the audit history. Every state transition is
// recorded, with these ops:
//
//	kv.set, kv.delete                     Value/Prev: the entry's new/previous JSON value
//	workflow.create, workflow.claim,      Value/Prev: the run's status, agent_id, attempt,
//	workflow.reclaim, workflow.heartbeat, fence and last_step after/before (plus step
//	workflow.checkpoint, workflow.finish, for checkpoints)
//	workflow.release
//	lease.acquire, lease.renew,           Value/Prev: holder, fence and expires_at (Unix ms)
//	lease.release, lease.takeover
//	session.save, session.delete          Value/Prev: the snapshot's size in bytes
//	kv.import, session.import,            Value: the imported record, as kv.set, session.save,
//	lease.import, workflow.import         lease.acquire and workflow.create record it (import.go)
//	workflow.link                         on the parent: Value {"child_run_id"} (the child's
//	                                      workflow.create has its parent_run_id)
//	workflow.join, workflow.rejoin        on a join parent: released to created when its last
//	                                      child finished / back to waiting (children.go)
//	workflow.replay                       CreateRun with a known idempotency key: Value
//	                                      {"idempotency_key"}
//	once.start, once.done                 Once took the lease on an effect / recorded its
//	                                      result (Value: the result)
//	erase.namespace, erase.subject        an erasure's tombstone (erase.go): Value
//	                                      {"records","events","keys_destroyed"}, Principal
//	                                      who erased, Key the subject
//	keys.rotate, keys.reencrypt,          key management (erase.go): Value {"primary"},
//	keys.retire                           {"records"}, {"retired"}; Principal who did it
//	erased                                an event whose payload was sealed with the keys of
//	                                      an erased subject: shown without key or payload
//
// Key is the entry's key, the run id, the lease's resource id, the session
// id or the effect's key.
type Event struct {
	// ID increases with every event of the namespace.
	ID int64
	// Revision is the store revision of the write that recorded the event.
	Revision int64
	Key      string
	Op       string
	Value    json.RawMessage
	Prev     json.RawMessage
	// AgentID is the agent id the writer claimed (WithAgent, agent_id).
	AgentID string
	// Principal is the authenticated identity the write was made for
	// (WithPrincipal), or "".
	Principal string
	Time      time.Time
}

// A HistoryQuery selects history entries.
type HistoryQuery struct {
	// Key selects one key's entries; "" means all keys.
	Key string
	// Limit is the number of newest entries to return (default 10, at most
	// 1000).
	Limit int
	// Before returns entries older than the one with this ID; 0 means from
	// the newest.
	Before int64
}

// History returns history entries newest first.
func (s *Store) History(ctx context.Context, q HistoryQuery) ([]Event, error) {
	evs, err := s.history(ctx, q)
	return evs, wrap("history", q.Key, err)
}

func (s *Store) history(ctx context.Context, q HistoryQuery) ([]Event, error) {
	if q.Limit == 0 {
		q.Limit = DefaultHistoryLimit
	}
	if q.Limit < 1 {
		return nil, invalid("n", "must be >= 1, got %d", q.Limit)
	}
	if q.Limit > MaxHistoryLimit {
		return nil, invalid("n", "must be at most %d, got %d", MaxHistoryLimit, q.Limit)
	}
	if len(q.Key) > s.c.opts.Limits.MaxKeyBytes {
		return nil, invalid("key", "is %d bytes long, the limit is %d", len(q.Key), s.c.opts.Limits.MaxKeyBytes)
	}
	if q.Before < 0 {
		return nil, invalid("before", "must not be negative")
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	bes, err := s.c.drv.History(ctx, &backend.HistoryQuery{NS: s.ns, Key: q.Key, Before: q.Before, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(bes))
	for i, e := range bes {
		out[i] = eventOf(e)
	}
	return out, nil
}

// eventOf is a stored event as package state shows it.
func eventOf(e backend.Event) Event {
	agent, principal := splitWriter(e.Writer)
	ev := Event{ID: e.ID, Revision: e.Revision, Key: e.Key, Op: e.Op, Value: e.Value, Prev: e.Prev,
		AgentID: agent, Principal: principal, Time: e.Time}
	if strings.HasPrefix(e.Op, "lease.") {
		ev.Value = fillFence(e.Value, e.Revision)
	}
	return ev
}

// fillFence completes the value of an event that started a lease tenure:
// its fence is the revision of the write that recorded it, which was not
// known when the event was written.
func fillFence(v json.RawMessage, rev int64) json.RawMessage {
	var le layout.LeaseEvent
	if json.Unmarshal(v, &le) != nil || le.Fence != 0 {
		return v
	}
	le.Fence = rev
	b, _ := json.Marshal(le)
	return b
}
