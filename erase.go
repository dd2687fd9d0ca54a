package state

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Erasure on request and key management of encryption at rest
// (docs/encryption.md).

// SubjectOption is the option WithSubject returns, honoured by Set,
// SetSession, SetMany and CreateRun.
type SubjectOption interface {
	SetOption
	SetManyOption
	CreateOption
}

// WithSubject tags what a write stores as data about one subject (a
// person whose data may have to be erased on request, GDPR Art. 17): the
// value of an entry or session is sealed with the subject's own data keys,
// and so is every output of a run created with it (which also gets the
// tag SubjectTag). EraseSubject then removes all of it and destroys those
// keys, which leaves the history entries of those writes unreadable. It
// needs encryption at rest (Options.Encryption): without it the call
// fails with ErrNoEncryption. The subject id itself is kept in clear, as
// every id is.
func WithSubject(subject string) SubjectOption { return subjectOption(subject) }

type subjectOption string

func (v subjectOption) apply(o *callOptions) { o.set |= optSubject; o.subject = string(v) }
func (subjectOption) setOption()             {}
func (subjectOption) setManyOption()         {}
func (subjectOption) createOption()          {}

// ContextWithSubject returns ctx carrying subject as the subject of every
// write made with it that does not say WithSubject itself (Set, SetMany,
// SetSession, CreateRun, and also Update and Once, which take no
// WithSubject): a host that knows whose data a call writes (the sidecar,
// from the caller's token) tags the writes of a whole call at once. ""
// means none.
func ContextWithSubject(ctx context.Context, subject string) context.Context {
	return context.WithValue(ctx, defaultSubjectKey{}, subject)
}

type defaultSubjectKey struct{}

// subjectCtx returns ctx carrying the subject of o (or of
// ContextWithSubject), checked.
func (s *Store) subjectCtx(ctx context.Context, o callOptions) (context.Context, error) {
	if !o.has(optSubject) {
		d, _ := ctx.Value(defaultSubjectKey{}).(string)
		if d == "" {
			return ctx, nil
		}
		o.subject = d
	}
	if err := checkKey("subject", o.subject, s.c.opts.Limits.MaxIDBytes); err != nil {
		return ctx, err
	}
	if s.c.drv.seal == nil {
		return ctx, fmt.Errorf("subject: needs encryption at rest (Options.Encryption): %w", ErrNoEncryption)
	}
	ctx, _ = withSubject(ctx, o.subject)
	return ctx, nil
}

// Erasure is what an erasure removed.
type Erasure struct {
	// Records is the number of records deleted (entries, sessions, runs
	// and their outputs, effects).
	Records int64
	// Events is the number of history events deleted (EraseNamespace) or
	// made unreadable by destroying their keys (EraseSubject).
	Events int64
	// KeysDestroyed is set when data keys were destroyed (encryption on).
	KeysDestroyed bool
}

// The ops of the tombstones erasures leave in history.
const (
	OpEraseNamespace = "erase.namespace"
	OpEraseSubject   = "erase.subject"
)

// tombstone is the value of an erasure's history event: what was
// erased, never the erased data.
type tombstone struct {
	Records       int64 `json:"records"`
	Events        int64 `json:"events"`
	KeysDestroyed bool  `json:"keys_destroyed"`
}

// EraseNamespace erases the store's namespace (a tenant): it destroys its
// data keys when encryption is on (so that every copy of its data, in a
// backup or a replica, becomes unreadable), deletes every record and
// history event, and leaves one tombstone in history (op
// erase.namespace, by the principal of ctx, WithPrincipal) saying how much
// it erased.
func (s *Store) EraseNamespace(ctx context.Context) (Erasure, error) {
	e, err := s.eraseNamespace(ctx)
	return e, wrap(OpEraseNamespace, s.ns, err)
}

func (s *Store) eraseNamespace(ctx context.Context) (Erasure, error) {
	done, err := s.enter()
	if err != nil {
		return Erasure{}, err
	}
	defer done()
	var e Erasure
	if s.c.drv.seal != nil {
		if err := s.c.drv.seal.c.DestroyKeys(ctx, KeyScope{Namespace: s.ns}); err != nil {
			return Erasure{}, err
		}
		e.KeysDestroyed = true
	}
	r, err := s.c.drv.Reset(ctx, &backend.ResetQuery{NS: s.ns, CountPrefixes: []string{
		layout.KVPrefix, layout.RunPrefix, layout.OutputPrefix, layout.LeasePrefix, layout.SessionPrefix,
		layout.IdemPrefix, layout.EffectPrefix}})
	if err != nil {
		return e, err
	}
	s.c.hub.reset(s.ns)
	e.Records, e.Events = r.Records, r.Events
	return e, s.tombstone(ctx, OpEraseNamespace, "", e)
}

// tombstone records an erasure in history.
func (s *Store) tombstone(ctx context.Context, op, key string, e Erasure) error {
	v, _ := json.Marshal(tombstone(e))
	_, err := s.commit(ctx, &backend.Txn{Events: []backend.Event{{Key: key, Op: op, Value: v}}})
	return err
}

// EraseSubject erases everything written about subject (WithSubject) in
// the store's namespace: the entries, sessions and effects sealed with
// its keys, the runs tagged with it (SubjectTag) and their outputs; then
// it destroys the subject's data keys, so that the history entries of
// those writes, and every copy of them, can no longer be read (History
// shows them as op "erased", without key or payload), and leaves one
// tombstone in history (op erase.subject, key: the subject, by the
// principal of ctx) saying how much it erased. It needs encryption at rest
// (ErrNoEncryption otherwise). Erasing a subject twice is not an error.
func (s *Store) EraseSubject(ctx context.Context, subject string) (Erasure, error) {
	e, err := s.eraseSubject(ctx, subject)
	return e, wrap(OpEraseSubject, subject, err)
}

func (s *Store) eraseSubject(ctx context.Context, subject string) (Erasure, error) {
	if err := checkKey("subject", subject, s.c.opts.Limits.MaxIDBytes); err != nil {
		return Erasure{}, err
	}
	if s.c.drv.seal == nil {
		return Erasure{}, ErrNoEncryption
	}
	done, err := s.enter()
	if err != nil {
		return Erasure{}, err
	}
	defer done()
	var e Erasure
	// Runs tagged with the subject: each with its indexes, outputs and
	// counters.
	idx := layout.TagIndex(SubjectTag, subject)
	after := ""
	for {
		page, err := s.c.drv.List(ctx, &backend.ListQuery{NS: s.ns, Prefix: idx, After: after, Limit: 500, KeysOnly: true})
		if err != nil {
			return e, err
		}
		for _, r := range page {
			n, err := s.eraseRun(ctx, layout.IDOf(r.Key[len(idx):]))
			if err != nil {
				return e, err
			}
			e.Records += n
		}
		if len(page) < 500 {
			break
		}
		after = page[len(page)-1].Key
	}
	// Every other record sealed with the subject's keys.
	n, err := s.scanSealed(ctx, func(r backend.Record, env envelope) (*backend.Op, *backend.Cond) {
		if env.subject != subject {
			return nil, nil
		}
		return &backend.Op{Kind: backend.OpDelete, Key: r.Key}, &backend.Cond{Key: r.Key, Revision: r.Revision}
	})
	e.Records += n
	if err != nil {
		return e, err
	}
	if e.Events, err = s.subjectEvents(ctx, subject); err != nil {
		return e, err
	}
	if err := s.c.drv.seal.c.DestroyKeys(ctx, KeyScope{Namespace: s.ns, Subject: subject}); err != nil {
		return e, err
	}
	e.KeysDestroyed = true
	return e, s.tombstone(ctx, OpEraseSubject, subject, e)
}

// subjectEvents counts the history events whose payload is sealed with
// subject's keys.
func (s *Store) subjectEvents(ctx context.Context, subject string) (int64, error) {
	var n int64
	before := int64(0)
	for {
		page, err := s.c.drv.historySealed(ctx, &backend.HistoryQuery{NS: s.ns, Before: before, Limit: 1000})
		if err != nil {
			return n, err
		}
		for _, ev := range page {
			for _, p := range [][]byte{ev.Value, ev.Prev} {
				if env, ok := parseEnvelope(p); ok && env.subject == subject {
					n++
					break
				}
			}
		}
		if len(page) < 1000 {
			return n, nil
		}
		before = page[len(page)-1].ID
	}
}

// eraseRun deletes run id, whatever its status (unlike DeleteRun, which
// takes finished runs only), with its index entries, outputs and the
// counters that count it, and returns how many records it deleted.
func (s *Store) eraseRun(ctx context.Context, id string) (int64, error) {
	if id == "" {
		return 0, nil
	}
	var n int64
	// Outputs first: a run without outputs is still a run, never the
	// reverse.
	for {
		page, err := s.c.drv.List(ctx, &backend.ListQuery{NS: s.ns, Prefix: layout.Outputs(id), Limit: 500, KeysOnly: true})
		if err != nil {
			return n, err
		}
		if len(page) == 0 {
			break
		}
		txn := &backend.Txn{}
		for _, r := range page {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: r.Key})
		}
		if _, err := s.commit(ctx, txn); err != nil {
			return n, err
		}
		n += int64(len(page))
	}
	for {
		stamp, drvNow := s.now()
		r, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: []string{layout.Run(id)}, Now: drvNow, IncludeExpired: true})
		if err != nil {
			return n, err
		}
		if !r[0].Found() {
			return n, nil
		}
		v, err := decodeRun(r[0])
		if err != nil {
			return n, err
		}
		txn := &backend.Txn{If: []backend.Cond{{Key: layout.Run(id), Revision: r[0].Revision}},
			Then: []backend.Op{{Kind: backend.OpDelete, Key: layout.Run(id)}}}
		for _, k := range layout.IndexKeys(id, v) {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: k})
		}
		d := layout.CountDeltas("", v.Status)
		for c := range d {
			d[c] = -d[c]
		}
		txn.Then = append(txn.Then, addOps(d, layout.StatusCount, stamp)...)
		if v.Parent != "" {
			txn.Then = append(txn.Then, addOps(d, func(c string) string { return layout.ChildCount(v.Parent, c) }, stamp)...)
		}
		res, err := s.commit(ctx, txn)
		if err != nil {
			return n, err
		}
		if res.Committed {
			return n + 1, nil
		}
	}
}

// scanSealed walks every record of the namespace under a sealed prefix,
// as stored (sealed), and commits the writes fn asks for, each on its
// condition, in batches; it returns how many writes committed. A write
// whose condition failed (the record changed meanwhile) is skipped.
func (s *Store) scanSealed(ctx context.Context, fn func(r backend.Record, e envelope) (*backend.Op, *backend.Cond)) (int64, error) {
	var n int64
	for _, p := range sealedPrefixes {
		after := ""
		for {
			_, drvNow := s.now()
			page, err := s.c.drv.listSealed(ctx, &backend.ListQuery{NS: s.ns, Prefix: p, After: after, Limit: 200, Now: drvNow})
			if err != nil {
				return n, err
			}
			for _, r := range page {
				env, ok := parseEnvelope(r.Value)
				if !ok {
					continue
				}
				op, cond := fn(r, env)
				if op == nil {
					continue
				}
				txn := &backend.Txn{Then: []backend.Op{*op}}
				if cond != nil {
					txn.If = []backend.Cond{*cond}
				}
				res, err := s.commit(ctx, txn)
				if err != nil {
					return n, err
				}
				if res.Committed {
					n++
				}
			}
			if len(page) < 200 {
				break
			}
			after = page[len(page)-1].Key
		}
	}
	return n, nil
}

// cipher returns the store's Cipher, or ErrNoEncryption.
func (s *Store) cipher() (Cipher, error) {
	if s.c.drv.seal == nil {
		return nil, ErrNoEncryption
	}
	return s.c.drv.seal.c, nil
}

// Keys lists the keys of the namespace's data key set, with how many
// records and history events each one seals (subjects' keys are not
// listed). It needs encryption at rest (ErrNoEncryption).
func (s *Store) Keys(ctx context.Context) ([]KeyInfo, error) {
	keys, err := s.keys(ctx)
	return keys, wrap("keys.list", s.ns, err)
}

func (s *Store) keys(ctx context.Context) ([]KeyInfo, error) {
	c, err := s.cipher()
	if err != nil {
		return nil, err
	}
	done, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer done()
	keys, err := c.Keys(ctx, KeyScope{Namespace: s.ns})
	if err != nil {
		return nil, err
	}
	recs, evs, err := s.keyUse(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range keys {
		keys[i].Records, keys[i].Events = recs[keys[i].ID], evs[keys[i].ID]
	}
	return keys, nil
}

// keyUse counts, per key id, the records and the history events of the
// namespace sealed with a key of the namespace's own key set.
func (s *Store) keyUse(ctx context.Context, c Cipher) (recs, evs map[uint32]int64, err error) {
	recs, evs = map[uint32]int64{}, map[uint32]int64{}
	_, err = s.scanSealed(ctx, func(r backend.Record, e envelope) (*backend.Op, *backend.Cond) {
		if id, ok := c.KeyID(e.ct); ok && e.subject == "" {
			recs[id]++
		}
		return nil, nil
	})
	if err != nil {
		return nil, nil, err
	}
	before := int64(0)
	for {
		page, err := s.c.drv.historySealed(ctx, &backend.HistoryQuery{NS: s.ns, Before: before, Limit: 1000})
		if err != nil {
			return nil, nil, err
		}
		for _, ev := range page {
			for _, p := range [][]byte{ev.Value, ev.Prev} {
				if e, ok := parseEnvelope(p); ok && e.subject == "" {
					if id, ok := c.KeyID(e.ct); ok {
						evs[id]++
					}
				}
			}
		}
		if len(page) < 1000 {
			return recs, evs, nil
		}
		before = page[len(page)-1].ID
	}
}

// RotateKey adds a new key to the namespace's data key set and makes it
// the primary: every write from now on is sealed with it (other replicas
// follow within encryption.Config.RefreshInterval), and the older keys
// keep decrypting. Reencrypt then moves the older records to it, after
// which RetireKey can delete an old key. It needs encryption at rest.
func (s *Store) RotateKey(ctx context.Context) (KeyInfo, error) {
	k, err := s.rotateKey(ctx)
	return k, wrap("keys.rotate", s.ns, err)
}

func (s *Store) rotateKey(ctx context.Context) (KeyInfo, error) {
	c, err := s.cipher()
	if err != nil {
		return KeyInfo{}, err
	}
	done, err := s.enter()
	if err != nil {
		return KeyInfo{}, err
	}
	defer done()
	k, err := c.RotateKey(ctx, KeyScope{Namespace: s.ns})
	if err != nil {
		return KeyInfo{}, err
	}
	return k, s.keyEvent(ctx, "keys.rotate", map[string]any{"primary": k.ID})
}

// keyEvent records a key management action in history, by the principal
// of ctx (WithPrincipal).
func (s *Store) keyEvent(ctx context.Context, op string, v map[string]any) error {
	b, _ := json.Marshal(v)
	_, err := s.commit(ctx, &backend.Txn{Events: []backend.Event{{Op: op, Value: b}}})
	return err
}

// Reencrypt seals again, with the primary key, every live record of the
// namespace sealed with an older key of its key set, keeping its value,
// writer, update time and expiry (its version changes). It runs until the
// namespace is done, so run it in the background (or with the sidecar's
// `state-sidecar keys reencrypt`); a record written meanwhile is already
// sealed with the primary key and is skipped. History events are not
// rewritten: they keep their keys until they age out (Options
// HistoryMaxAge, HistoryMaxEvents). It returns how many records it sealed
// again.
func (s *Store) Reencrypt(ctx context.Context) (int64, error) {
	n, err := s.reencrypt(ctx)
	return n, wrap("keys.reencrypt", s.ns, err)
}

func (s *Store) reencrypt(ctx context.Context) (int64, error) {
	c, err := s.cipher()
	if err != nil {
		return 0, err
	}
	done, err := s.enter()
	if err != nil {
		return 0, err
	}
	defer done()
	keys, err := c.Keys(ctx, KeyScope{Namespace: s.ns})
	if err != nil {
		return 0, err
	}
	var primary uint32
	for _, k := range keys {
		if k.Primary {
			primary = k.ID
		}
	}
	var failed error
	n, err := s.scanSealed(ctx, func(r backend.Record, e envelope) (*backend.Op, *backend.Cond) {
		id, ok := c.KeyID(e.ct)
		if !ok || id == primary || e.subject != "" || failed != nil {
			return nil, nil
		}
		pt, err := s.c.drv.seal.openRecord(ctx, s.ns, r.Key, r.Value)
		if err != nil {
			failed = err
			return nil, nil
		}
		op := &backend.Op{Kind: backend.OpPut, Key: r.Key, Value: pt, Writer: r.Writer, Time: r.UpdatedAt}
		if !r.ExpiresAt.IsZero() {
			stamp, _ := s.now()
			if op.TTL = roundTTL(r.ExpiresAt.Sub(stamp)); op.TTL <= 0 {
				return nil, nil
			}
		}
		return op, &backend.Cond{Key: r.Key, Revision: r.Revision}
	})
	if err == nil {
		err = failed
	}
	if err != nil {
		return n, err
	}
	return n, s.keyEvent(ctx, "keys.reencrypt", map[string]any{"records": n})
}

// RetireKey deletes key id from the namespace's data key set. It is
// refused, with a *KeyInUseError matching ErrKeyInUse, while a record or
// history event is still sealed with it (run Reencrypt first; history
// events age out), and for the primary key. It needs encryption at rest.
func (s *Store) RetireKey(ctx context.Context, id uint32) error {
	return wrap("keys.retire", s.ns, s.retireKey(ctx, id))
}

func (s *Store) retireKey(ctx context.Context, id uint32) error {
	c, err := s.cipher()
	if err != nil {
		return err
	}
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	recs, evs, err := s.keyUse(ctx, c)
	if err != nil {
		return err
	}
	if recs[id] > 0 || evs[id] > 0 {
		return &KeyInUseError{ID: id, Records: recs[id], Events: evs[id]}
	}
	if err := c.RetireKey(ctx, KeyScope{Namespace: s.ns}, id); err != nil {
		return err
	}
	return s.keyEvent(ctx, "keys.retire", map[string]any{"retired": id})
}
