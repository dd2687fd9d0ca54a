package pgstate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultMaxBatch is how many calls of one kind a driver sends together at
// most, unless Options.MaxBatch says otherwise.
const DefaultMaxBatch = 16

// A batcher sends the calls of one kind (sets, lease calls, claims) that
// wait at the same moment in one round trip and one transaction. Each call
// is one statement (a call of the kind's function, as when it is sent
// alone), and a batch is a pgx batch of them: sent with one write, run by
// the server one after another in one implicit transaction, committed
// once. So concurrent writers share a round trip, a commit, and the
// server's per-transaction work, which on a busy server costs more than a
// small write itself.
//
// Batching never delays a call: at most limit batches of the kind are in
// flight, and a call made while fewer are goes out at once (alone, when no
// other waits). Calls made while limit are in flight queue, and the next
// batch to go takes the queue's oldest calls of one namespace, up to max.
// The caller whose call opens a sender sends batches itself (no goroutine
// is handed the work) until its own call has been answered; then, when
// calls still wait, it hands the sending over to a goroutine and returns.
//
// A batch's calls run in the order of their keys' advisory locks (and in
// the order they were made for one key), the order every writer takes its
// locks in, so that batches do not deadlock with each other or with other
// writers. A batch of claims takes all its runs' locks first: each claim
// also takes the counter of claimed runs' lock (shared), and a batch that
// held it while it waited for the next run's lock could close a cycle with
// a writer holding that run and a reader of the counter. Results reach the
// callers only once the batch has committed. When the server fails a
// statement of a batch (a deadlock, a stored value it refuses), the
// transaction has done nothing, and each call of the batch is sent again
// alone, so that it gets its own answer; when the batch fails otherwise
// (the connection breaks, the session is ended), it may have committed,
// and every call gets the error, as a call sent alone would.
type batcher[Q, R any] struct {
	d     *Driver
	kind  batchKind[Q, R]
	limit int // senders at most
	max   int // calls per batch at most
	// lockFirst makes a batch take its namespace's lock and its calls'
	// key locks before its first call.
	lockFirst bool

	mu    sync.Mutex
	queue []*pending[Q, R]
	busy  int // senders running
}

// batchKind is what a batcher needs of one kind of call.
type batchKind[Q, R any] interface {
	// single sends q alone, with its own retries.
	single(ctx context.Context, c querier, q Q) (R, error)
	// queue adds q's statement to b.
	queue(b *pgx.Batch, q Q)
	// scan reads q's result; again asks for q to be sent alone after the
	// batch committed (a claim that needs a second call).
	scan(row pgx.Row, q Q) (res R, again bool, err error)
}

// querier sends one statement: a pool, or a connection taken from it.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// pending is one call waiting in a batcher.
type pending[Q, R any] struct {
	ctx  context.Context
	ns   string
	lock int64 // the advisory lock of the call's key
	q    Q
	res  R
	err  error
	done chan struct{}
}

func newBatcher[Q, R any](d *Driver, kind batchKind[Q, R], limit, most int) *batcher[Q, R] {
	return &batcher[Q, R]{d: d, kind: kind, limit: max(limit, 1), max: max(most, 1)}
}

// do makes call q of namespace ns on the key whose advisory lock is lock,
// and returns its result, or ctx's error when ctx ends first (the call may
// then still be made, as a statement that ctx cancels may still commit).
func (b *batcher[Q, R]) do(ctx context.Context, ns string, lock int64, q Q) (R, error) {
	if b.max == 1 {
		return b.kind.single(ctx, b.d.pool, q)
	}
	p := &pending[Q, R]{ctx: ctx, ns: ns, lock: lock, q: q, done: make(chan struct{})}
	b.mu.Lock()
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
		return zero, ctx.Err()
	}
}

// send sends batches until own (if not nil) has been answered and, if
// calls still wait then, hands the sending over to a goroutine. Its caller
// counts as one of busy.
func (b *batcher[Q, R]) send(own *pending[Q, R]) {
	for {
		if calls := b.take(); len(calls) > 0 {
			b.run(calls)
		}
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
		b.mu.Unlock()
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
// the calls of the same namespace after it, up to max, and returns them in
// the order of their locks (stable: calls on one key keep their order).
// Calls whose callers have left are dropped unsent.
func (b *batcher[Q, R]) take() []*pending[Q, R] {
	b.mu.Lock()
	defer b.mu.Unlock()
	var calls []*pending[Q, R]
	rest := b.queue[:0]
	for _, p := range b.queue {
		switch {
		case p.ctx.Err() != nil:
			// Its caller has returned: nobody waits for it.
		case len(calls) < b.max && (len(calls) == 0 || p.ns == calls[0].ns):
			calls = append(calls, p)
		default:
			rest = append(rest, p)
		}
	}
	clear(b.queue[len(rest):])
	b.queue = rest
	slices.SortStableFunc(calls, func(x, y *pending[Q, R]) int { return cmp.Compare(x.lock, y.lock) })
	return calls
}

// run sends calls and answers each: alone with its caller's context, or
// else as one batch.
func (b *batcher[Q, R]) run(calls []*pending[Q, R]) {
	defer func() {
		// A panic must not end the process from a sender's goroutine,
		// nor leave callers waiting: each call gets it as an error (its
		// outcome unknown, as when a connection breaks).
		if r := recover(); r != nil {
			for _, p := range calls {
				p.err = fmt.Errorf("pgstate: internal error: %v", r)
			}
		}
		for _, p := range calls {
			close(p.done)
		}
	}()
	if len(calls) == 1 {
		p := calls[0]
		p.res, p.err = b.kind.single(p.ctx, b.d.pool, p.q)
		return
	}
	ctx, cancel := batchCtx(calls)
	defer cancel()
	conn, err := b.d.pool.Acquire(ctx)
	if err != nil {
		for _, p := range calls {
			p.err = err
		}
		return
	}
	defer conn.Release()
	again, err := b.batch(ctx, conn, calls)
	switch {
	case failedStatement(err):
		// The transaction did nothing: each call alone gets its own answer.
		for _, p := range calls {
			p.res, p.err = b.kind.single(p.ctx, conn, p.q)
		}
	case err != nil:
		for _, p := range calls {
			p.err = err
		}
	default:
		for i, p := range calls {
			if again[i] {
				p.res, p.err = b.kind.single(p.ctx, conn, p.q)
			}
		}
	}
}

// failedStatement reports whether err is the server failing a statement
// (severity ERROR: a deadlock, a value it refuses, a statement cancelled),
// which aborts the transaction and leaves the connection usable, so that
// nothing of it was committed. Anything else (a connection that broke, a
// FATAL error ending the session) may have come after the commit.
func failedStatement(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Severity == "ERROR"
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

// batch sends calls on conn as one pgx batch, reads every result and then
// the commit, and reports which calls must be sent again alone.
func (b *batcher[Q, R]) batch(ctx context.Context, conn *pgxpool.Conn, calls []*pending[Q, R]) ([]bool, error) {
	pb := &pgx.Batch{}
	if b.lockFirst {
		locks := make([]int64, len(calls))
		for i, p := range calls {
			locks[i] = p.lock
		}
		pb.Queue(b.d.q.lockNS, b.d.nsLock(calls[0].ns))
		pb.Queue(b.d.q.lockKeys, slices.Compact(locks))
	}
	for _, p := range calls {
		b.kind.queue(pb, p.q)
	}
	br := conn.SendBatch(ctx, pb)
	again := make([]bool, len(calls))
	var err error
	if b.lockFirst {
		for range 2 {
			if _, err = br.Exec(); err != nil {
				_ = br.Close()
				return again, err
			}
		}
	}
	for i, p := range calls {
		if p.res, again[i], err = b.kind.scan(br.QueryRow(), p.q); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return again, err
}

// stmtKind is a kind of call that is one statement with no retries: its
// SQL, and how its one row is read.
type stmtKind[R any] struct {
	sql  string
	read func(pgx.Row) (R, error)
}

func (k stmtKind[R]) single(ctx context.Context, c querier, args []any) (R, error) {
	return k.read(c.QueryRow(ctx, k.sql, args...))
}

func (k stmtKind[R]) queue(b *pgx.Batch, args []any) { b.Queue(k.sql, args...) }

func (k stmtKind[R]) scan(row pgx.Row, _ []any) (R, bool, error) {
	r, err := k.read(row)
	return r, false, err
}
