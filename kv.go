package state

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Key listing page sizes.
const (
	DefaultListLimit = 1000
	MaxListLimit     = 10000
)

// An Entry is a key-value entry as stored.
type Entry struct {
	Key string
	// Value is the stored JSON value; a stored JSON null reads back as null.
	Value json.RawMessage
	// Version increases with every write of the key; 0 means not found
	// (GetMany).
	Version int64
	// AgentID is the writer given with WithAgent, or "".
	AgentID   string
	UpdatedAt time.Time
	// ExpiresAt is zero for an entry without TTL.
	ExpiresAt time.Time
}

// Found reports whether the entry exists; GetMany uses it for missing keys.
func (e Entry) Found() bool { return e.Version != 0 }

// Decode unmarshals the value into v.
func (e Entry) Decode(v any) error { return json.Unmarshal(e.Value, v) }

// A KeyPage is one page of a key listing.
type KeyPage struct {
	Keys []string
	// NextCursor continues the listing (WithCursor); "" when it is complete.
	NextCursor string
}

// An Item is one key-value pair of a batch.
type Item struct {
	Key   string
	Value any
}

func entryOf(key string, r backend.Record) Entry {
	agent, _ := splitWriter(r.Writer)
	return Entry{Key: key, Value: r.Value, Version: r.Revision, AgentID: agent,
		UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt}
}

// Set stores value (anything encoding/json accepts; a json.RawMessage is
// stored as is) under key and returns the new entry. It honours WithTTL,
// WithAgent and IfVersion. A Set without WithTTL clears an earlier TTL. Every
// Set is recorded in history with the previous live value.
func (s *Store) Set(ctx context.Context, key string, value any, opts ...SetOption) (Entry, error) {
	e, err := s.set(ctx, key, value, collect(opts))
	return e, wrap("kv.set", key, err)
}

func (s *Store) set(ctx context.Context, key string, value any, o callOptions) (Entry, error) {
	lim := s.c.opts.Limits
	if err := checkKey("key", key, lim.MaxKeyBytes); err != nil {
		return Entry{}, err
	}
	if err := s.checkWrite(o); err != nil {
		return Entry{}, err
	}
	val, err := encodeJSON("value", value, lim.MaxValueBytes)
	if err != nil {
		return Entry{}, err
	}
	if ctx, err = s.subjectCtx(ctx, o); err != nil {
		return Entry{}, err
	}
	rk := layout.KV(key)
	res, stamp, err := s.putRecord(ctx, rk, val, o, backend.IntentSet,
		backend.Event{Key: key, Op: "kv.set", Value: val, PrevOf: rk, Writer: o.agent})
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Key: key, Value: val, Version: res.Revision, AgentID: o.agent, UpdatedAt: stamp}
	if o.ttl > 0 {
		e.ExpiresAt = res.Now.Add(o.ttl)
	}
	return e, nil
}

// putRecord writes val to record rk, honouring WithTTL, WithAgent and
// IfVersion, and records ev in history, in a commit of intent in. It
// returns the commit's result and the time the record was stamped with.
func (s *Store) putRecord(ctx context.Context, rk string, val []byte, o callOptions, in backend.Intent, ev backend.Event) (backend.Result, time.Time, error) {
	done, err := s.enter()
	if err != nil {
		return backend.Result{}, time.Time{}, err
	}
	defer done()
	stamp, _ := s.now()
	txn := &backend.Txn{
		Intent: in,
		Then:   []backend.Op{{Kind: backend.OpPut, Key: rk, Value: val, Writer: o.agent, TTL: o.ttl, Time: stamp}},
		Events: []backend.Event{ev},
	}
	if o.versionOK {
		txn.If = []backend.Cond{{Key: rk, Revision: o.version}}
	}
	res, err := s.commit(ctx, txn)
	if err != nil {
		return backend.Result{}, time.Time{}, err
	}
	if !res.Committed {
		return backend.Result{}, time.Time{}, &ConflictError{Current: res.Current}
	}
	return res, stamp, nil
}

// checkWrite validates the options of a write.
func (s *Store) checkWrite(o callOptions) error {
	if o.has(optTTL) {
		if err := checkTTL("ttl", o.ttl); err != nil {
			return err
		}
	}
	if o.versionOK && o.version < 0 {
		return invalid("if_version", "must be 0 (absent) or a version, got %d", o.version)
	}
	return checkOptionalID("agent_id", o.agent, s.c.opts.Limits.MaxIDBytes)
}

// Get returns the live entry at key, or an error matching ErrNotFound if it
// is missing or expired.
func (s *Store) Get(ctx context.Context, key string) (Entry, error) {
	r, err := s.getRecord(ctx, "key", key, layout.KV(key))
	if err != nil {
		return Entry{}, wrap("kv.get", key, err)
	}
	return entryOf(key, r), nil
}

// getRecord reads the live record rk of key, validating key as field.
func (s *Store) getRecord(ctx context.Context, field, key, rk string) (backend.Record, error) {
	if err := checkKey(field, key, s.c.opts.Limits.MaxKeyBytes); err != nil {
		return backend.Record{}, err
	}
	done, err := s.enter()
	if err != nil {
		return backend.Record{}, err
	}
	defer done()
	_, now := s.now()
	return s.c.drv.Get(ctx, s.ns, rk, now)
}

// Exists reports whether a live entry is stored at key.
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.Get(ctx, key)
	if err == nil {
		return true, nil
	}
	if isNotFound(err) {
		return false, nil
	}
	return false, err
}

// Delete removes the entry at key and reports whether a live entry was
// deleted (an expired entry is not live). It honours IfVersion (a mismatch
// is a *ConflictError) and WithAgent (recorded in history as the deleter). A
// deletion is recorded in history.
func (s *Store) Delete(ctx context.Context, key string, opts ...DeleteOption) (bool, error) {
	ok, err := s.deleteRecord(ctx, "kv.delete", "key", key, layout.KV(key), collect(opts))
	return ok, wrap("kv.delete", key, err)
}

// deleteRecord deletes the record rk of a key-value entry or session, under
// an optional version condition, recording op in history.
func (s *Store) deleteRecord(ctx context.Context, op, field, key, rk string, o callOptions) (bool, error) {
	if err := checkKey(field, key, s.c.opts.Limits.MaxKeyBytes); err != nil {
		return false, err
	}
	if err := s.checkWrite(o); err != nil {
		return false, err
	}
	done, err := s.enter()
	if err != nil {
		return false, err
	}
	defer done()
	deleted := false
	_, err = s.update(ctx, []string{rk}, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		r := recs[0]
		deleted = false
		cur := int64(0)
		if r.Live() {
			cur = r.Revision
		}
		if o.versionOK && o.version != cur {
			return nil, &ConflictError{Current: cur}
		}
		if !r.Live() {
			return nil, nil
		}
		deleted = true
		prev := r.Value
		if op == "session.delete" {
			prev = sizeJSON(len(r.Value))
		}
		return &backend.Txn{
			Then:   []backend.Op{{Kind: backend.OpDelete, Key: rk}},
			Events: []backend.Event{{Key: key, Op: op, Prev: prev, Writer: o.agent}},
		}, nil
	})
	return deleted, err
}

// List returns a page of live keys starting with prefix, in byte order. The
// prefix is literal and case-sensitive. It honours WithLimit (default 1000,
// at most 10000) and WithCursor.
func (s *Store) List(ctx context.Context, prefix string, opts ...ListOption) (KeyPage, error) {
	p, err := s.list(ctx, prefix, collect(opts))
	return p, wrap("kv.list", prefix, err)
}

func (s *Store) list(ctx context.Context, prefix string, o callOptions) (KeyPage, error) {
	if len(prefix) > s.c.opts.Limits.MaxKeyBytes {
		return KeyPage{}, invalid("prefix", "is %d bytes long, the limit is %d", len(prefix), s.c.opts.Limits.MaxKeyBytes)
	}
	limit, err := pageLimit(o.limit, DefaultListLimit, MaxListLimit)
	if err != nil {
		return KeyPage{}, err
	}
	after, err := decodeCursor(o.cursor)
	if err != nil {
		return KeyPage{}, err
	}
	if after != "" && !strings.HasPrefix(after, prefix) {
		return KeyPage{}, invalid("cursor", "belongs to a listing of another prefix")
	}
	done, err := s.enter()
	if err != nil {
		return KeyPage{}, err
	}
	defer done()
	_, now := s.now()
	q := &backend.ListQuery{NS: s.ns, Prefix: layout.KV(prefix), Limit: limit + 1, Now: now, KeysOnly: true}
	if after != "" {
		q.After = layout.KV(after)
	}
	recs, err := s.c.drv.List(ctx, q)
	if err != nil {
		return KeyPage{}, err
	}
	page := KeyPage{Keys: make([]string, 0, min(len(recs), limit))}
	for i, r := range recs {
		if i == limit {
			page.NextCursor = encodeCursor(page.Keys[limit-1])
			break
		}
		page.Keys = append(page.Keys, r.Key[len(layout.KVPrefix):])
	}
	return page, nil
}

// SetMany stores every item in one atomic write: all are stored or none is.
// It honours WithTTL and WithAgent (applied to every item). Keys must be
// distinct.
func (s *Store) SetMany(ctx context.Context, items []Item, opts ...SetManyOption) ([]Entry, error) {
	es, err := s.setMany(ctx, items, collect(opts))
	return es, wrap("kv.set_many", "", err)
}

func (s *Store) setMany(ctx context.Context, items []Item, o callOptions) ([]Entry, error) {
	lim := s.c.opts.Limits
	if len(items) > lim.MaxBatch {
		return nil, invalid("items", "has %d items, the limit is %d", len(items), lim.MaxBatch)
	}
	if err := s.checkWrite(o); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(items))
	vals := make([][]byte, len(items))
	for i, it := range items {
		field := "items[" + itoa(i) + "]"
		if err := checkKey(field+".key", it.Key, lim.MaxKeyBytes); err != nil {
			return nil, err
		}
		if seen[it.Key] {
			return nil, invalid(field+".key", "repeats key %q", it.Key)
		}
		seen[it.Key] = true
		v, err := encodeJSON(field+".value", it.Value, lim.MaxValueBytes)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	if len(items) == 0 {
		return nil, nil
	}
	ctx, err := s.subjectCtx(ctx, o)
	if err != nil {
		return nil, err
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	stamp, _ := s.now()
	txn := &backend.Txn{}
	if len(items) == 1 {
		txn.Intent = backend.IntentSet // a set of one entry is a Set
	}
	for i, it := range items {
		rk := layout.KV(it.Key)
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: rk, Value: vals[i], Writer: o.agent, TTL: o.ttl, Time: stamp})
		txn.Events = append(txn.Events, backend.Event{Key: it.Key, Op: "kv.set", Value: vals[i], PrevOf: rk, Writer: o.agent})
	}
	res, err := s.commit(ctx, txn)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(items))
	for i, it := range items {
		out[i] = Entry{Key: it.Key, Value: vals[i], Version: res.Revision, AgentID: o.agent, UpdatedAt: stamp}
		if o.ttl > 0 {
			out[i].ExpiresAt = res.Now.Add(o.ttl)
		}
	}
	return out, nil
}

// GetMany returns one entry per key, in order; a missing or expired key
// gives an Entry whose Found is false.
func (s *Store) GetMany(ctx context.Context, keys []string) ([]Entry, error) {
	es, err := s.getMany(ctx, keys)
	return es, wrap("kv.get_many", "", err)
}

func (s *Store) getMany(ctx context.Context, keys []string) ([]Entry, error) {
	lim := s.c.opts.Limits
	if len(keys) > lim.MaxBatch {
		return nil, invalid("keys", "has %d keys, the limit is %d", len(keys), lim.MaxBatch)
	}
	rks := make([]string, len(keys))
	for i, k := range keys {
		if err := checkKey("keys["+itoa(i)+"]", k, lim.MaxKeyBytes); err != nil {
			return nil, err
		}
		rks[i] = layout.KV(k)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	_, now := s.now()
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: rks, Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(keys))
	for i, r := range recs {
		out[i] = Entry{Key: keys[i]}
		if r.Live() {
			out[i] = entryOf(keys[i], r)
		}
	}
	return out, nil
}
