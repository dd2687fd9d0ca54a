package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/statesidecar/state/backend"
)

// The gate's half of encryption at rest (cipher.go): sealing what a commit
// writes and opening what a read returns, for every call the gate makes.

// subjectBox carries the subject of a call's writes (WithSubject) through
// its context to the gate. A write that learns its subject only from what
// it reads (a checkpoint, from its run's tag) sets it inside its update.
type subjectBox struct{ subject string }

type subjectCtxKey struct{}

// withSubject returns ctx carrying a box holding subject.
func withSubject(ctx context.Context, subject string) (context.Context, *subjectBox) {
	b := &subjectBox{subject: subject}
	return context.WithValue(ctx, subjectCtxKey{}, b), b
}

// subjectOf returns the subject ctx carries, or "".
func subjectOf(ctx context.Context) string {
	if b, ok := ctx.Value(subjectCtxKey{}).(*subjectBox); ok {
		return b.subject
	}
	return ""
}

// sealTxn returns txn with every value it writes under a sealed prefix, and
// every payload of an event of a sealed op, sealed for ns and the
// subject ctx carries. txn itself is not changed: the caller may commit it
// again. A value that is already sealed (Reencrypt's, or one copied from a
// record) is kept as it is.
func (g *gate) sealTxn(ctx context.Context, ns string, txn *backend.Txn) (*backend.Txn, error) {
	if g.seal == nil || txn == nil || ns == KeysNamespace {
		return txn, nil
	}
	subject := subjectOf(ctx)
	out := *txn
	var sealedOf map[string][]byte // record key -> the sealed value written
	copiedOps, copiedEvs := false, false
	for i, op := range txn.Then {
		if op.Kind != backend.OpPut || !sealedKey(op.Key) || isSealed(op.Value) {
			continue
		}
		if !copiedOps {
			out.Then, copiedOps = append([]backend.Op(nil), txn.Then...), true
		}
		v, err := g.seal.seal(ctx, kindRecord, ns, subject, op.Key, "", op.Value)
		if err != nil {
			return nil, err
		}
		out.Then[i].Value = v
		if len(txn.Events) > 0 && strings.HasPrefix(op.Key, "k/") {
			if sealedOf == nil {
				sealedOf = map[string][]byte{}
			}
			sealedOf[op.Key] = v
		}
	}
	for i, ev := range txn.Events {
		if !sealedOp(ev.Op) || (len(ev.Value) == 0 || isSealed(ev.Value)) && (len(ev.Prev) == 0 || isSealed(ev.Prev)) {
			continue
		}
		if !copiedEvs {
			out.Events, copiedEvs = append([]backend.Event(nil), txn.Events...), true
		}
		e := &out.Events[i]
		if len(ev.Value) > 0 && !isSealed(ev.Value) {
			// A key-value event whose value is its record's shares the
			// record's ciphertext (one encryption per Set; and a Set's
			// event Value is its Op's, as backend.IntentSet promises).
			if v, ok := sealedOf["k/"+ev.Key]; ok && strings.HasPrefix(ev.Op, "kv.") && g.samePut(txn, "k/"+ev.Key, ev.Value) {
				e.Value = v
			} else {
				v, err := g.seal.seal(ctx, kindValue, ns, subject, ev.Key, ev.Op, ev.Value)
				if err != nil {
					return nil, err
				}
				e.Value = v
			}
		}
		if len(ev.Prev) > 0 && !isSealed(ev.Prev) {
			v, err := g.seal.seal(ctx, kindPrev, ns, subject, ev.Key, ev.Op, ev.Prev)
			if err != nil {
				return nil, err
			}
			e.Prev = v
		}
	}
	return &out, nil
}

// samePut reports whether txn puts exactly v at record key.
func (g *gate) samePut(txn *backend.Txn, key string, v []byte) bool {
	for _, op := range txn.Then {
		if op.Kind == backend.OpPut && op.Key == key {
			return string(op.Value) == string(v)
		}
	}
	return false
}

// openRecords opens, in place, the values of recs that are sealed records
// of ns. A value under a sealed prefix that is not sealed fails
// (ErrNotEncrypted).
func (g *gate) openRecords(ctx context.Context, ns string, recs []backend.Record) error {
	if g.seal == nil {
		return unexpectedSeal(recs)
	}
	if ns == KeysNamespace {
		return nil
	}
	for i := range recs {
		r := &recs[i]
		if r.Revision == 0 || !sealedKey(r.Key) {
			continue
		}
		v, err := g.seal.openRecord(ctx, ns, r.Key, r.Value)
		if err != nil {
			return err
		}
		r.Value = v
	}
	return nil
}

// unexpectedSeal fails on a sealed record read by a store without
// encryption: its bytes are no value, and must not be returned as one.
func unexpectedSeal(recs []backend.Record) error {
	for i := range recs {
		if v := recs[i].Value; len(v) > 0 && v[0] == 0 && isSealed(v) {
			return fmt.Errorf("record %q is encrypted: %w", recs[i].Key, ErrNoEncryption)
		}
	}
	return nil
}

// openEvents opens, in place, the payloads of evs. An event whose subject's
// keys were erased is shown without its key and payloads, as op "erased".
func (g *gate) openEvents(ctx context.Context, ns string, evs []backend.Event) error {
	if g.seal == nil {
		for i := range evs {
			if isSealed(evs[i].Value) || isSealed(evs[i].Prev) {
				return fmt.Errorf("history event %d is encrypted: %w", evs[i].ID, ErrNoEncryption)
			}
		}
		return nil
	}
	if ns == KeysNamespace {
		return nil
	}
	for i := range evs {
		ev := &evs[i]
		sealedEv := sealedOp(ev.Op)
		var err error
		if len(ev.Value) > 0 && (sealedEv || isSealed(ev.Value)) {
			var v []byte
			if v, err = g.seal.openPayload(ctx, ns, ev, kindValue, ev.Value); err == nil {
				ev.Value = v
			}
		}
		if err == nil && len(ev.Prev) > 0 && (sealedEv || isSealed(ev.Prev)) {
			var v []byte
			if v, err = g.seal.openPayload(ctx, ns, ev, kindPrev, ev.Prev); err == nil {
				ev.Prev = v
			}
		}
		if errors.Is(err, ErrErased) {
			*ev = backend.Event{ID: ev.ID, Revision: ev.Revision, Op: OpErased, Writer: ev.Writer, Time: ev.Time}
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// OpErased is the op History shows for an event whose payload was sealed
// with the keys of an erased subject: its key and payloads are gone.
const OpErased = "erased"

// prepare makes ready, before a driver's read-modify-write (during which
// the key table, in the same backend, must not be called), the key sets
// the update may need: the namespace's and the subject's of ctx, and
// those of the records it reads, sealed ones or runs tagged with a subject.
func (g *gate) prepare(ctx context.Context, q *backend.GetQuery) error {
	if g.seal == nil || q.NS == KeysNamespace {
		return nil
	}
	scopes := map[string]bool{"": true, subjectOf(ctx): true}
	cctx, s, err := g.begin(ctx, callGetMany, q.NS, len(q.Keys))
	if err != nil {
		return err
	}
	recs, err := g.drv.GetMany(cctx, &backend.GetQuery{NS: q.NS, Keys: q.Keys, Now: q.Now, IncludeExpired: true})
	s.done(err)
	if err != nil {
		return err
	}
	for _, r := range recs {
		switch {
		case r.Revision == 0:
		case sealedKey(r.Key):
			if e, ok := parseEnvelope(r.Value); ok && !scopes[e.subject] {
				scopes[e.subject] = false // read only: an erased subject's stays erased
			}
			// Opening it now loads a key another replica added since this
			// one read the key set; an error is the update's to report.
			_, _ = g.seal.openRecord(ctx, q.NS, r.Key, r.Value)
		case strings.HasPrefix(r.Key, backend.RunPrefix):
			if v, err := backend.DecodeRun(r.Value); err == nil && v.Tags[SubjectTag] != "" {
				scopes[v.Tags[SubjectTag]] = true // the run's outputs are written with them
			}
		}
	}
	for subject, create := range scopes {
		if err := g.seal.c.Prepare(ctx, KeyScope{Namespace: q.NS, Subject: subject}, create); err != nil && !errors.Is(err, ErrErased) {
			return err
		}
	}
	return nil
}

// SubjectTag is the tag CreateRun gives a run created WithSubject: its
// outputs are sealed with the subject's keys, and EraseSubject finds it by
// the tag.
const SubjectTag = "state.subject"

// listSealed is List without opening the values: what the driver stores.
// Key management (Reencrypt, Keys, EraseSubject) reads the envelopes.
func (g *gate) listSealed(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	cctx, s, err := g.begin(ctx, callList, q.NS, 0)
	if err != nil {
		return nil, err
	}
	recs, err := g.drv.List(cctx, q)
	s.done(err)
	return recs, err
}

// historySealed is History without opening the payloads.
func (g *gate) historySealed(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	cctx, s, err := g.begin(ctx, callHistory, q.NS, 0)
	if err != nil {
		return nil, err
	}
	evs, err := g.drv.History(cctx, q)
	s.done(err)
	return evs, err
}
