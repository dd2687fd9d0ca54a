package state

import (
	"context"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A Write is one change of an Update: it stores Value under Key, or, with
// Delete set, removes Key.
type Write struct {
	Key string
	// Value is stored as Set stores it: anything encoding/json accepts, a
	// json.RawMessage as is. It must be nil when Delete is set.
	Value any
	// Delete removes the entry; its key must be one the Update read.
	// Deleting a missing or expired entry writes nothing and records nothing.
	Delete bool
	// TTL makes the entry expire TTL after the write; 0 means never, and, as
	// with a Set without WithTTL, clears an earlier TTL.
	TTL time.Duration
	// AgentID is recorded as the writer, as with WithAgent.
	AgentID string
	// Private keeps the value out of history: the write's kv.set event
	// records {"size":N} (the value's length in bytes) in place of the
	// value, as a session's events do, and neither it nor a kv.delete of
	// the entry records the previous value. Waiters (WaitKey, Watch) are
	// woken as for any write. Use it for entries whose content must not
	// outlive them in history; a later write that is not Private records
	// the value it replaces as usual.
	Private bool
}

// An UpdateFunc computes the writes of an Update from the entries its keys
// hold, one per key in the order of the keys; a missing or expired key gives
// an Entry whose Found is false. It may be called more than once (when
// another writer changed one of the keys in between) and must have no side
// effects beyond its return values. An error aborts the Update: nothing is
// written and Update returns the error, wrapped in an *Error.
type UpdateFunc func(cur []Entry) ([]Write, error)

// Update is an atomic read-modify-write of several key-value entries. It
// reads the entries of keys, calls fn with them and applies every Write fn
// returns in one atomic commit: either all are applied or none is, and no
// other write to any of keys happens between the read and the commit. A put
// may also write a key that was not read (without a condition on it); a
// delete must name a key that was read. This gives conditional multi-key writes (compare the versions fn
// sees and return an error to refuse) and read-modify-writes of shared
// records (merge into what fn sees).
//
// Backends that run a read-modify-write natively (memory, SQLite) do it
// under their own lock or transaction; on the others Update reads, then
// commits under the condition that every key read still has the version it
// read, and calls fn again when one changed.
//
// It returns one Entry per Write, in order: for a put the stored entry with
// its new version, for a delete an Entry with only Key set. keys must be
// distinct and so must the keys of the writes; both lists are bounded by
// Limits.MaxBatch. Every put is recorded in history as a Set ("kv.set") and
// every deletion of a live entry as a Delete ("kv.delete"), with the
// previous value.
func (s *Store) Update(ctx context.Context, keys []string, fn UpdateFunc) ([]Entry, error) {
	out, err := s.updateEntries(ctx, keys, fn)
	return out, wrap("kv.update", "", err)
}

func (s *Store) updateEntries(ctx context.Context, keys []string, fn UpdateFunc) ([]Entry, error) {
	lim := s.c.opts.Limits
	if fn == nil {
		return nil, invalid("fn", "must not be nil")
	}
	ctx, err := s.subjectCtx(ctx, callOptions{}) // ContextWithSubject's, if any
	if err != nil {
		return nil, err
	}
	if len(keys) > lim.MaxBatch {
		return nil, invalid("keys", "has %d keys, the limit is %d", len(keys), lim.MaxBatch)
	}
	rks := make([]string, len(keys))
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		field := "keys[" + itoa(i) + "]"
		if err := checkKey(field, k, lim.MaxKeyBytes); err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, invalid(field, "repeats key %q", k)
		}
		seen[k] = true
		rks[i] = layout.KV(k)
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Entry
	var ttls []time.Duration
	res, err := s.update(ctx, rks, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		cur := make(map[string]backend.Record, len(recs))
		entries := make([]Entry, len(recs))
		for i, r := range recs {
			entries[i] = Entry{Key: keys[i]}
			cur[keys[i]] = backend.Record{}
			if r.Live() {
				entries[i] = entryOf(keys[i], r)
				cur[keys[i]] = r
			}
		}
		writes, err := fn(entries)
		if err != nil {
			return nil, err
		}
		var txn *backend.Txn
		txn, out, ttls, err = s.updateTxn(writes, cur, now)
		return txn, err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].UpdatedAt.IsZero() {
			continue // a delete
		}
		out[i].Version = res.Revision
		if ttls[i] > 0 {
			out[i].ExpiresAt = res.Now.Add(ttls[i])
		}
	}
	return out, nil
}

// updateTxn validates the writes an UpdateFunc returned and turns them into
// a commit. read holds the record of every key read (a zero Record when it
// was missing or expired). It returns the entries to report (UpdatedAt is
// zero for a delete) and the TTL of each write.
func (s *Store) updateTxn(writes []Write, read map[string]backend.Record, now time.Time) (*backend.Txn, []Entry, []time.Duration, error) {
	lim := s.c.opts.Limits
	if len(writes) > lim.MaxBatch {
		return nil, nil, nil, invalid("writes", "has %d writes, the limit is %d", len(writes), lim.MaxBatch)
	}
	if len(writes) == 0 {
		return nil, nil, nil, nil
	}
	seen := make(map[string]bool, len(writes))
	out := make([]Entry, len(writes))
	ttls := make([]time.Duration, len(writes))
	txn := &backend.Txn{}
	stamp := now.UTC().Truncate(time.Millisecond)
	for i, w := range writes {
		field := "writes[" + itoa(i) + "]"
		if err := checkKey(field+".key", w.Key, lim.MaxKeyBytes); err != nil {
			return nil, nil, nil, err
		}
		if seen[w.Key] {
			return nil, nil, nil, invalid(field+".key", "repeats key %q", w.Key)
		}
		seen[w.Key] = true
		if err := checkOptionalID(field+".agent_id", w.AgentID, lim.MaxIDBytes); err != nil {
			return nil, nil, nil, err
		}
		rk := layout.KV(w.Key)
		r, wasRead := read[w.Key]
		out[i] = Entry{Key: w.Key}
		if w.Delete {
			switch {
			case w.Value != nil || w.TTL != 0:
				return nil, nil, nil, invalid(field, "deletes its key, so it must set neither value nor ttl")
			case !wasRead:
				return nil, nil, nil, invalid(field+".key", "is deleted but was not read by the update (only keys read can be deleted)")
			case r.Live():
				ev := backend.Event{Key: w.Key, Op: "kv.delete", Prev: r.Value, Writer: w.AgentID}
				if w.Private {
					ev.Prev = nil
				}
				txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: rk})
				txn.Events = append(txn.Events, ev)
			}
			continue
		}
		ttl := w.TTL
		if ttl != 0 {
			if err := checkTTL(field+".ttl", ttl); err != nil {
				return nil, nil, nil, err
			}
			ttl = roundTTL(ttl) // as every TTL: whole milliseconds, rounded up
		}
		val, err := encodeJSON(field+".value", w.Value, lim.MaxValueBytes)
		if err != nil {
			return nil, nil, nil, err
		}
		ev := backend.Event{Key: w.Key, Op: "kv.set", Value: val, Writer: w.AgentID}
		switch {
		case w.Private:
			ev.Value = sizeJSON(len(val))
		case r.Live():
			ev.Prev = r.Value
		case !wasRead:
			ev.PrevOf = rk
		}
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: rk, Value: val, Writer: w.AgentID, TTL: ttl, Time: stamp})
		txn.Events = append(txn.Events, ev)
		out[i] = Entry{Key: w.Key, Value: val, AgentID: w.AgentID, UpdatedAt: stamp}
		ttls[i] = ttl
	}
	if len(txn.Then) == 0 {
		return nil, out, ttls, nil
	}
	return txn, out, ttls, nil
}
