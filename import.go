package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Importing brings records kept by another system (the Python sidecar's,
// through package pyimport) into a store with what the store can hold of
// them: keys and ids, values, writers, update times, remaining lifetimes,
// runs with their status, attempt, agent, last step, outputs and times, and
// history entries with their original times.
//
// Every import method writes a record only where its key holds no live
// record, and leaves a record that is there as it is: importing the same
// records twice duplicates nothing and overwrites nothing, not even a record
// that changed since the first import. Each record written is recorded in
// history with an op of its own ("kv.import", "session.import",
// "lease.import", "workflow.import"), so the audit log tells imported state
// from state written through the store. Imported history entries keep their
// ops, keys, values, agents and times, but get this namespace's ids.

// Import batches are split into commits of at most importBatchOps writes and
// about importBatchBytes bytes of values.
const (
	importBatchOps   = 500
	importBatchBytes = 4 << 20
)

// An ImportedEntry is a key-value entry to import.
type ImportedEntry struct {
	Key string
	// Value is the entry's JSON value.
	Value json.RawMessage
	// AgentID is who wrote the value, or "".
	AgentID string
	// UpdatedAt is when the value was written; zero means the time of the
	// import.
	UpdatedAt time.Time
	// TTL is the entry's remaining lifetime, counted from the import's
	// commit; 0 means it never expires.
	TTL time.Duration
}

// An ImportedSession is a session snapshot to import.
type ImportedSession struct {
	ID string
	// Context is the snapshot, a JSON object.
	Context json.RawMessage
	// AgentID is who saved it, or "".
	AgentID string
	// UpdatedAt is when it was saved last; zero means the time of the
	// import.
	UpdatedAt time.Time
	// TTL is the snapshot's remaining lifetime; 0 means it never expires.
	TTL time.Duration
}

// An ImportedLease is a live lease to import.
type ImportedLease struct {
	Resource string
	Holder   string
	// TTL is the lease's remaining lifetime, counted from the import's
	// commit; it must be positive. It is also the lifetime GetLease reports
	// as the lease's TTL until the holder renews it.
	TTL time.Duration
}

// An ImportedEvent is a history entry to import.
type ImportedEvent struct {
	// Seq is the entry's position in the source's own log: positive and
	// increasing within a call and across calls of one source. The store
	// keeps only the last Seq it copied (see ImportHistory), not the Seqs.
	Seq int64
	Key string
	// Op is what the entry records, such as "kv.set".
	Op string
	// Value and Prev are the new and previous JSON values, or nil.
	Value json.RawMessage
	Prev  json.RawMessage
	// AgentID is who made the change, or "".
	AgentID string
	// Time is when the change happened; it must be set.
	Time time.Time
}

// ImportEntries writes, in one atomic commit, each entry whose key holds no
// live entry, and reports for each whether it was written (false: an entry
// was there and is kept as it is). Entries are checked as Set checks its
// arguments, and an invalid one (a *FieldError naming it, such as
// "entries[3].value") fails the call before anything is written. Keys must
// be distinct; at most Limits.MaxBatch entries.
func (s *Store) ImportEntries(ctx context.Context, entries []ImportedEntry) ([]bool, error) {
	ok, err := s.importEntries(ctx, entries)
	return ok, wrap("kv.import", "", err)
}

func (s *Store) importEntries(ctx context.Context, entries []ImportedEntry) ([]bool, error) {
	lim := s.c.opts.Limits
	if len(entries) > lim.MaxBatch {
		return nil, invalid("entries", "has %d entries, the limit is %d", len(entries), lim.MaxBatch)
	}
	stamp, _ := s.now()
	items := make([]importItem, len(entries))
	for i, e := range entries {
		field := "entries[" + itoa(i) + "]"
		val, err := s.checkImported(field, e.Key, "key", e.Value, "value", e.AgentID, e.TTL)
		if err != nil {
			return nil, err
		}
		rk := layout.KV(e.Key)
		items[i] = importItem{field: field + ".key",
			put:   backend.Op{Kind: backend.OpPut, Key: rk, Value: val, Writer: e.AgentID, TTL: roundTTL(e.TTL), Time: orStamp(e.UpdatedAt, stamp)},
			event: backend.Event{Key: e.Key, Op: "kv.import", Value: val, Writer: e.AgentID}}
	}
	return s.importRecords(ctx, items)
}

// ImportSessions writes, in one atomic commit, each session whose id holds
// no live session, and reports for each whether it was written (false: a
// session was there and is kept as it is). Sessions are checked as
// SetSession checks its arguments; an invalid one fails the call before
// anything is written. Ids must be distinct; at most Limits.MaxBatch
// sessions.
func (s *Store) ImportSessions(ctx context.Context, sessions []ImportedSession) ([]bool, error) {
	ok, err := s.importSessions(ctx, sessions)
	return ok, wrap("session.import", "", err)
}

func (s *Store) importSessions(ctx context.Context, sessions []ImportedSession) ([]bool, error) {
	lim := s.c.opts.Limits
	if len(sessions) > lim.MaxBatch {
		return nil, invalid("sessions", "has %d sessions, the limit is %d", len(sessions), lim.MaxBatch)
	}
	stamp, _ := s.now()
	items := make([]importItem, len(sessions))
	for i, ss := range sessions {
		field := "sessions[" + itoa(i) + "]"
		val, err := s.checkImported(field, ss.ID, "session_id", ss.Context, "context", ss.AgentID, ss.TTL)
		if err != nil {
			return nil, err
		}
		if val[0] != '{' {
			return nil, invalid(field+".context", "must be a JSON object")
		}
		items[i] = importItem{field: field + ".session_id",
			put: backend.Op{Kind: backend.OpPut, Key: layout.Session(ss.ID), Value: val, Writer: ss.AgentID,
				TTL: roundTTL(ss.TTL), Time: orStamp(ss.UpdatedAt, stamp)},
			event: backend.Event{Key: ss.ID, Op: "session.import", Value: sizeJSON(len(val)), Writer: ss.AgentID}}
	}
	return s.importRecords(ctx, items)
}

// ImportLeases writes, in one atomic commit, each lease whose resource has
// no live lease, and reports for each whether it was written (false: a live
// lease is there and is kept as it is). A written lease is held by its
// holder, who may renew or release it as if it had acquired it, with a
// fence token of its own (the commit's revision, as for an acquire). Leases
// are checked as TryAcquireLease checks its arguments; an invalid one fails the
// call before anything is written. Resources must be distinct; at most
// Limits.MaxBatch leases.
func (s *Store) ImportLeases(ctx context.Context, leases []ImportedLease) ([]bool, error) {
	ok, err := s.importLeases(ctx, leases)
	return ok, wrap("lease.import", "", err)
}

func (s *Store) importLeases(ctx context.Context, leases []ImportedLease) ([]bool, error) {
	lim := s.c.opts.Limits
	if len(leases) > lim.MaxBatch {
		return nil, invalid("leases", "has %d leases, the limit is %d", len(leases), lim.MaxBatch)
	}
	stamp, _ := s.now()
	items := make([]importItem, len(leases))
	for i, l := range leases {
		field := "leases[" + itoa(i) + "]"
		if err := checkKey(field+".resource_id", l.Resource, lim.MaxKeyBytes); err != nil {
			return nil, err
		}
		if err := checkKey(field+".holder_id", l.Holder, lim.MaxIDBytes); err != nil {
			return nil, err
		}
		if err := checkTTL(field+".ttl", l.TTL); err != nil {
			return nil, err
		}
		ttl := roundTTL(l.TTL)
		items[i] = importItem{field: field + ".resource_id", lease: true,
			put:   backend.Op{Kind: backend.OpPut, Key: layout.Lease(l.Resource), Value: backend.LeaseValue(ttl), Writer: l.Holder, TTL: ttl, Time: stamp},
			event: backend.Event{Key: l.Resource, Op: "lease.import", Writer: l.Holder}}
	}
	return s.importRecords(ctx, items)
}

// checkImported validates the id, JSON value, agent and TTL of an imported
// entry or session and returns the value as the store keeps it.
func (s *Store) checkImported(field, id, idField string, value json.RawMessage, valueField, agent string, ttl time.Duration) ([]byte, error) {
	lim := s.c.opts.Limits
	if err := checkKey(field+"."+idField, id, lim.MaxKeyBytes); err != nil {
		return nil, err
	}
	if err := checkOptionalID(field+".agent_id", agent, lim.MaxIDBytes); err != nil {
		return nil, err
	}
	if ttl != 0 {
		if err := checkTTL(field+".ttl", ttl); err != nil {
			return nil, err
		}
	}
	if value == nil {
		return nil, invalid(field+"."+valueField, "must be set (JSON null is the four bytes null)")
	}
	return encodeJSON(field+"."+valueField, value, lim.MaxValueBytes)
}

// orStamp returns t in milliseconds, or stamp when t is zero.
func orStamp(t, stamp time.Time) time.Time {
	if t.IsZero() {
		return stamp
	}
	return t.UTC().Truncate(time.Millisecond)
}

// importItem is one record to write unless its key holds a live record.
type importItem struct {
	field string // the argument naming its key, for errors
	put   backend.Op
	event backend.Event
	// lease is set for a lease, whose event says when it expires.
	lease bool
}

// importRecords writes, in one atomic commit, each item whose key holds no
// live record, and reports which it wrote.
func (s *Store) importRecords(ctx context.Context, items []importItem) ([]bool, error) {
	keys := make([]string, len(items))
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if seen[it.put.Key] {
			return nil, invalid(it.field, "repeats %q", it.event.Key)
		}
		seen[it.put.Key] = true
		keys[i] = it.put.Key
	}
	written := make([]bool, len(items))
	if len(items) == 0 {
		return written, nil
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	_, err = s.update(ctx, keys, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		txn := &backend.Txn{}
		for i, r := range recs {
			written[i] = !r.Live()
			if r.Live() {
				continue
			}
			it := items[i]
			ev := it.event
			if it.lease { // its fence is the commit's revision, filled in when history is read
				ev.Value = layout.LeaseEventOf(it.put.Writer, 0, now.Add(it.put.TTL))
			}
			txn.Then = append(txn.Then, it.put)
			txn.Events = append(txn.Events, ev)
		}
		if len(txn.Then) == 0 {
			return nil, nil
		}
		return txn, nil
	})
	if err != nil {
		return nil, err
	}
	return written, nil
}

// ImportHistory appends events to the namespace's history, keeping their
// keys, ops, values, agents and times; each gets the namespace's next event
// id, so events imported in the order of their source's log read back in
// that order. The store remembers, per source (an id of the caller's choice
// naming the log the events come from, at most Limits.MaxKeyBytes bytes),
// the last Seq it appended, and skips events at or before it, so importing a
// log again appends only what is new in it. Events are checked before
// anything is written; at most Limits.MaxBatch per call, appended in one
// atomic commit. It returns how many events it appended.
//
// History retention applies to imported events as to any other: events
// older than Options.HistoryMaxAge are removed by the next sweep, and only
// the newest Options.HistoryMaxEvents are kept.
func (s *Store) ImportHistory(ctx context.Context, source string, events []ImportedEvent) (int, error) {
	n, err := s.importHistory(ctx, source, events)
	return n, wrap("history.import", source, err)
}

func (s *Store) importHistory(ctx context.Context, source string, events []ImportedEvent) (int, error) {
	lim := s.c.opts.Limits
	if err := checkKey("source", source, lim.MaxKeyBytes); err != nil {
		return 0, err
	}
	if len(events) > lim.MaxBatch {
		return 0, invalid("events", "has %d events, the limit is %d", len(events), lim.MaxBatch)
	}
	evs := make([]backend.Event, len(events))
	for i, e := range events {
		field := "events[" + itoa(i) + "]"
		switch {
		case e.Seq <= 0:
			return 0, invalid(field+".seq", "must be positive, got %d", e.Seq)
		case i > 0 && e.Seq <= events[i-1].Seq:
			return 0, invalid(field+".seq", "must be greater than the one before (%d), got %d", events[i-1].Seq, e.Seq)
		case e.Time.IsZero():
			return 0, invalid(field+".time", "must be set")
		}
		if err := checkKey(field+".key", e.Key, lim.MaxKeyBytes); err != nil {
			return 0, err
		}
		if err := checkKey(field+".op", e.Op, lim.MaxIDBytes); err != nil {
			return 0, err
		}
		if err := checkOptionalID(field+".agent_id", e.AgentID, lim.MaxIDBytes); err != nil {
			return 0, err
		}
		ev := backend.Event{Key: e.Key, Op: e.Op, Writer: e.AgentID, Time: e.Time.UTC().Truncate(time.Millisecond)}
		var err error
		if ev.Value, err = optionalJSON(field+".value", e.Value, lim.MaxValueBytes); err != nil {
			return 0, err
		}
		if ev.Prev, err = optionalJSON(field+".prev", e.Prev, lim.MaxValueBytes); err != nil {
			return 0, err
		}
		evs[i] = ev
	}
	if len(events) == 0 {
		return 0, nil
	}
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	mk := layout.ImportMark(source)
	n := 0
	_, err = s.update(ctx, []string{mk}, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		last, err := importMark(recs[0])
		if err != nil {
			return nil, err
		}
		txn := &backend.Txn{}
		n = 0
		for i, e := range events {
			if e.Seq > last {
				txn.Events = append(txn.Events, evs[i])
				n++
			}
		}
		if n == 0 {
			return nil, nil
		}
		val, _ := json.Marshal(layout.ImportMarkValue{Seq: events[len(events)-1].Seq})
		txn.Then = []backend.Op{{Kind: backend.OpPut, Key: mk, Value: val, Time: now}}
		return txn, nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// ImportedHistory returns the Seq of the last event ImportHistory appended
// from source to the namespace, or 0 when none was: an importer can read its
// source's log from there on.
func (s *Store) ImportedHistory(ctx context.Context, source string) (int64, error) {
	r, err := s.getRecord(ctx, "source", source, layout.ImportMark(source))
	if isNotFound(err) {
		return 0, nil
	}
	if err != nil {
		return 0, wrap("history.import", source, err)
	}
	seq, err := importMark(r)
	return seq, wrap("history.import", source, err)
}

// importMark reads an import mark record; an absent one is 0.
func importMark(r backend.Record) (int64, error) {
	if !r.Live() {
		return 0, nil
	}
	var m layout.ImportMarkValue
	if err := json.Unmarshal(r.Value, &m); err != nil {
		return 0, fmt.Errorf("stored import mark %s is corrupt: %w", r.Key, err)
	}
	return m.Seq, nil
}

// optionalJSON validates and compacts a JSON value that may be absent (nil
// or empty).
func optionalJSON(field string, v json.RawMessage, max int) ([]byte, error) {
	if len(v) == 0 {
		return nil, nil
	}
	return encodeJSON(field, v, max)
}
