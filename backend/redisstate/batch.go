package redisstate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

// DefaultMaxBatch is how many Gets, claims, or lease calls a driver sends
// in one script call at most, unless Options.MaxBatch says otherwise.
const DefaultMaxBatch = 16

// DefaultSenders is how many script calls of one kind (Gets, claims,
// lease calls) a driver has in flight at once, unless Options.Senders says
// otherwise.
const DefaultSenders = 2

// A batcher sends the calls of one kind (Gets, claims, lease calls) of
// one namespace that wait at the same moment in one script call: the
// kind's script takes any number of calls and serves them one after
// another, in the order they were made, in one atomic step (lua/get.lua,
// lua/claim.lua, lua/lease.lua). A Get made alone is a batch of one,
// through the same script; a claim or lease call made alone goes to a
// script of its own (lua/claimone.lua, lua/leaseone.lua), which decides
// and writes as the batch's does without the tables that a batch keeps,
// so that a lone call costs Redis no more than before batching (the batch
// script took a quarter more for one claim). So concurrent callers share
// a round trip, the script's start (which costs Redis more than a small
// command) and its reads and writes of the namespace's counters, history
// list and channel.
//
// Batching never delays a call: at most limit script calls of the kind
// are in flight, and a call made while fewer are goes out at once (alone,
// when no other waits). Calls made while limit are in flight queue, and
// the next batch to go takes the queue's oldest calls of one namespace and
// clock (the time the store gave, zero in production), up to max. The
// caller whose call opens a sender sends batches itself (no goroutine is
// handed the work) until its own call has been answered; then, when calls
// still wait, it hands the sending over to a goroutine and returns.
//
// When Redis fails the script (an error reply: a record it cannot decode,
// say), the script has written nothing (it writes only after deciding
// every call), and each call of the batch is sent again alone, so that it
// gets its own answer; when the batch fails otherwise (the connection
// breaks, a timeout), it may have been applied, and every call gets the
// error, as a call sent alone would.
type batcher[Q, R any] struct {
	d      *Driver
	script *redis.Script
	// one, if not nil, serves a batch of one call: its arguments are the
	// batch script's for one call, its reply the batch's element for it.
	one *redis.Script
	// args appends q's arguments to the script's.
	args func(args []any, q Q) []any
	// reply decodes q's reply, v, from the script.
	reply func(q Q, v any) (R, error)
	op    string // the operation errors name
	limit int    // script calls in flight at most
	max   int    // calls per script call at most

	mu    sync.Mutex
	queue []*pending[Q, R]
	busy  int // senders running
}

// pending is one call waiting in a batcher.
type pending[Q, R any] struct {
	ctx  context.Context
	ns   string
	now  time.Time
	q    Q
	res  R
	err  error
	done chan struct{}
}

// do makes call q in namespace ns at now and returns its result, or ctx's
// error when ctx ends first (the call may then still be made, as a
// command whose reply is lost may still be applied).
func (b *batcher[Q, R]) do(ctx context.Context, ns string, now time.Time, q Q) (R, error) {
	p := &pending[Q, R]{ctx: ctx, ns: ns, now: now, q: q}
	b.mu.Lock()
	if b.busy < b.limit && len(b.queue) == 0 {
		// Nothing waits: the call goes out at once, alone.
		b.busy++
		b.mu.Unlock()
		b.run([]*pending[Q, R]{p})
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.busy--
			b.mu.Unlock()
		} else {
			// Calls came meanwhile: a goroutine sends them.
			b.mu.Unlock()
			go b.send(nil)
		}
		return p.res, p.err
	}
	p.done = make(chan struct{})
	b.queue = append(b.queue, p)
	send := b.busy < b.limit
	if send {
		b.busy++
	}
	b.mu.Unlock()
	if send {
		b.send(p)
	}
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
		if answered(p) {
			return p.res, p.err
		}
		var zero R
		return zero, b.d.fail(ctx, b.op, ctx.Err())
	}
}

// send sends batches until own (if not nil) has been answered and, if
// calls still wait then, hands the sending over to a goroutine. Its caller
// counts as one of busy.
func (b *batcher[Q, R]) send(own *pending[Q, R]) {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.busy--
			b.mu.Unlock()
			return
		}
		if own != nil && answered(own) {
			b.mu.Unlock()
			go b.send(nil)
			return
		}
		calls := b.take()
		b.mu.Unlock()
		if len(calls) > 0 {
			b.run(calls)
		}
	}
}

// answered reports whether p has its result.
func answered[Q, R any](p *pending[Q, R]) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// take removes from the queue its oldest call whose caller still waits and
// the calls of the same namespace and clock after it, up to max, and
// returns them in the order they were made. Calls whose callers have left
// are dropped unsent. b.mu is held.
func (b *batcher[Q, R]) take() []*pending[Q, R] {
	var calls []*pending[Q, R]
	rest := b.queue[:0]
	for _, p := range b.queue {
		switch {
		case p.ctx.Err() != nil:
			// Its caller has returned: nobody waits for it.
		case len(calls) < b.max && (len(calls) == 0 || p.ns == calls[0].ns && p.now.Equal(calls[0].now)):
			calls = append(calls, p)
		default:
			rest = append(rest, p)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	return calls
}

// run sends calls in one script call and answers each.
func (b *batcher[Q, R]) run(calls []*pending[Q, R]) {
	defer func() {
		// A panic must not end the process from a sender's goroutine,
		// nor leave callers waiting: each call gets it as an error (its
		// outcome unknown, as when a connection breaks).
		if r := recover(); r != nil {
			for _, p := range calls {
				p.err = fmt.Errorf("redisstate: %s: internal error: %v", b.op, r)
			}
		}
		for _, p := range calls {
			if p.done != nil {
				close(p.done)
			}
		}
	}()
	if len(calls) == 1 {
		b.call(calls[0].ctx, calls)
		return
	}
	ctx, cancel := batchCtx(calls)
	defer cancel()
	var rerr redis.Error
	if err := b.call(ctx, calls); errors.As(err, &rerr) {
		// The script wrote nothing: each call alone gets its own answer.
		for _, p := range calls {
			b.call(p.ctx, []*pending[Q, R]{p})
		}
	}
}

// call runs the script once for calls and sets each call's result; it
// returns the script call's error, which each call then has too.
func (b *batcher[Q, R]) call(ctx context.Context, calls []*pending[Q, R]) error {
	args := []any{nowArg(calls[0].now)}
	for _, p := range calls {
		args = b.args(args, p.q)
	}
	script := b.script
	if len(calls) == 1 && b.one != nil {
		script = b.one
	}
	v, err := script.Run(ctx, b.d.rdb, []string{b.d.base(calls[0].ns)}, args...).Result()
	if err == nil && script == b.one {
		v = []any{v}
	}
	if err == nil {
		s, ok := v.([]any)
		if !ok || len(s) != len(calls) {
			err = fmt.Errorf("unexpected reply %T for %d calls", v, len(calls))
		} else {
			for i, p := range calls {
				if p.res, p.err = b.reply(p.q, s[i]); p.err != nil && !errors.Is(p.err, backend.ErrSkip) {
					p.err = b.d.fail(p.ctx, b.op, p.err)
				}
			}
			return nil
		}
	}
	for _, p := range calls {
		p.err = b.d.fail(p.ctx, b.op, err)
	}
	return err
}

// batchCtx is the context a batch is sent with: the values of its first
// call's context (tracing) and the latest deadline of its calls' (none if
// one has none), since it runs for all of them: no caller's leaving
// cancels it.
func batchCtx[Q, R any](calls []*pending[Q, R]) (context.Context, context.CancelFunc) {
	ctx := context.WithoutCancel(calls[0].ctx)
	var last time.Time
	for _, p := range calls {
		d, ok := p.ctx.Deadline()
		if !ok {
			return ctx, func() {}
		}
		if d.After(last) {
			last = d
		}
	}
	return context.WithDeadline(ctx, last)
}
