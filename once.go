package state

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A OnceResult is the outcome of Once.
type OnceResult struct {
	// Value is the effect's recorded result, as JSON.
	Value json.RawMessage
	// Ran is set when this call ran the effect (and recorded its result);
	// it is clear when the result was recorded by an earlier or concurrent
	// call.
	Ran bool
}

// effectValue is the stored value of an effect (layout.Effect).
type effectValue struct {
	// Token tells the lease of one caller from another's.
	Token string `json:"token"`
	// Done is set once the result is recorded.
	Done  bool            `json:"done,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Once is an effect ledger: it runs fn for key at most once at a time and
// records its result, so that a retried or resumed agent does not repeat a
// side effect that already happened (a payment, an e-mail).
//
// The first caller takes a lease on key (WithClaimTTL, default
// Options.ClaimTTL), runs fn and records what fn returns (as JSON, kept
// for WithTTL, default Options.IdempotencyWindow). Concurrent callers wait
// for it (polling every Options.LeasePollInterval, or when the lease
// expires) and, like every later caller, get the recorded result without
// running fn. When fn returns an error nothing is recorded and the lease
// is given back at once, so the next caller runs fn again; Once returns
// fn's error.
//
// The guarantee is at-least-once execution, exactly-once recording: if
// the caller running fn dies (or takes longer than its lease) before the
// result is recorded, its lease expires and a later caller runs fn again,
// so fn may run more than once and must be safe to repeat, or make the
// effect itself idempotent (pass key to the payment provider, say). But
// exactly one result is ever recorded for key, and every caller that gets
// a result gets that one. A caller whose lease expired before it could
// record gets the value it computed and an error matching ErrNotHeld:
// another caller took over the effect.
//
// History records once.start and once.done (with the result) under key.
func (s *Store) Once(ctx context.Context, key string, fn func(ctx context.Context) (any, error), opts ...OnceOption) (OnceResult, error) {
	r, err := s.once(ctx, key, fn, collect(opts))
	return r, wrap("once", key, err)
}

func (s *Store) once(ctx context.Context, key string, fn func(ctx context.Context) (any, error), o callOptions) (OnceResult, error) {
	if err := checkKey("key", key, s.c.opts.Limits.MaxKeyBytes); err != nil {
		return OnceResult{}, err
	}
	if fn == nil {
		return OnceResult{}, invalid("fn", "must not be nil")
	}
	ctx, err := s.subjectCtx(ctx, callOptions{}) // ContextWithSubject's, if any
	if err != nil {
		return OnceResult{}, err
	}
	lease, keep := s.c.opts.ClaimTTL, s.c.opts.IdempotencyWindow
	if o.has(optClaimTTL) {
		if err := checkTTL("claim_ttl", o.claimTTL); err != nil {
			return OnceResult{}, err
		}
		lease = o.claimTTL
	}
	if o.has(optTTL) {
		if err := checkTTL("ttl", o.ttl); err != nil {
			return OnceResult{}, err
		}
		keep = o.ttl
	}
	rk := layout.Effect(key)
	for {
		rec, ev, err := s.readEffect(ctx, rk)
		if err != nil {
			return OnceResult{}, err
		}
		switch {
		case rec.Live() && ev.Done:
			return OnceResult{Value: ev.Value}, nil
		case rec.Live():
			if err := s.waitEffect(ctx, rec.ExpiresAt); err != nil {
				return OnceResult{}, err
			}
			continue
		}
		mine := effectValue{Token: rand.Text()}
		val, _ := json.Marshal(mine)
		stamp, _ := s.now()
		res, err := s.commitEntered(ctx, &backend.Txn{
			If:     []backend.Cond{{Key: rk, Revision: 0}},
			Then:   []backend.Op{{Kind: backend.OpPut, Key: rk, Value: val, TTL: lease, Time: stamp}},
			Events: []backend.Event{{Key: key, Op: "once.start"}},
		})
		if err != nil {
			return OnceResult{}, err
		}
		if !res.Committed {
			continue // another caller took the lease first
		}
		return s.runEffect(ctx, key, res.Revision, mine, keep, fn)
	}
}

// runEffect runs fn under the lease taken at revision rev and records
// its result.
func (s *Store) runEffect(ctx context.Context, key string, rev int64, mine effectValue, keep time.Duration,
	fn func(ctx context.Context) (any, error)) (OnceResult, error) {
	rk := layout.Effect(key)
	held := []backend.Cond{{Key: rk, Revision: rev}}
	out, err := fn(ctx)
	var b []byte
	if err == nil {
		b, err = encodeJSON("value", out, s.c.opts.Limits.MaxValueBytes)
	}
	if err != nil {
		// Give the lease back so that the next caller runs fn at once.
		_, rerr := s.commitEntered(context.WithoutCancel(ctx), &backend.Txn{If: held, Then: []backend.Op{{Kind: backend.OpDelete, Key: rk}}})
		return OnceResult{}, errors.Join(err, rerr)
	}
	mine.Done, mine.Value = true, b
	val, _ := json.Marshal(mine)
	stamp, _ := s.now()
	res, err := s.commitEntered(context.WithoutCancel(ctx), &backend.Txn{
		If:     held,
		Then:   []backend.Op{{Kind: backend.OpPut, Key: rk, Value: val, TTL: keep, Time: stamp}},
		Events: []backend.Event{{Key: key, Op: "once.done", Value: b}},
	})
	if err != nil {
		return OnceResult{Value: b, Ran: true}, err
	}
	if !res.Committed {
		return OnceResult{Value: b, Ran: true}, &NotHeldError{}
	}
	return OnceResult{Value: b, Ran: true}, nil
}

// readEffect reads an effect's record.
func (s *Store) readEffect(ctx context.Context, rk string) (backend.Record, effectValue, error) {
	done, err := s.enter()
	if err != nil {
		return backend.Record{}, effectValue{}, err
	}
	defer done()
	_, now := s.now()
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: []string{rk}, Now: now})
	if err != nil || !recs[0].Live() {
		return backend.Record{}, effectValue{}, err
	}
	var ev effectValue
	if err := json.Unmarshal(recs[0].Value, &ev); err != nil {
		return backend.Record{}, effectValue{}, fmt.Errorf("stored effect %s is corrupt: %w", rk, err)
	}
	return recs[0], ev, nil
}

// commitEntered commits txn as one call of the store.
func (s *Store) commitEntered(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	done, err := s.enter()
	if err != nil {
		return backend.Result{}, err
	}
	defer done()
	return s.commit(ctx, txn)
}

// waitEffect waits for another caller's effect: until its lease expires
// (by the store's clock), Options.LeasePollInterval passes, ctx ends or
// the store closes.
func (s *Store) waitEffect(ctx context.Context, expires time.Time) error {
	poll := time.NewTimer(s.c.opts.LeasePollInterval)
	defer poll.Stop()
	var exp <-chan time.Time
	if !expires.IsZero() {
		c, stop := s.c.timerAt(expires)
		defer stop()
		exp = c
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.c.bg.Done():
		return ErrClosed
	case <-poll.C:
	case <-exp:
	}
	return nil
}
