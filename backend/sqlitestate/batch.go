package sqlitestate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/statesidecar/state/backend"
)

// maxBatch bounds how many writes share one transaction.
const maxBatch = 128

// Taking turns with other processes: SQLite has no queue for its write lock,
// so a process writing back to back would keep it while another polls. After
// holding it continuously for holdBudget the batcher pauses for yieldFor,
// which is longer than a waiting process's poll interval (lockPoll).
const (
	holdBudget = 20 * time.Millisecond
	yieldFor   = 2 * time.Millisecond
	lockPoll   = 250 * time.Microsecond
)

// A writeReq is one caller's write, waiting for the batcher.
type writeReq struct {
	ctx  context.Context
	work func(*wtx) error
	done chan error
	// deadline is when the caller stops waiting for another process's lock
	// (the driver's lock timeout after the call began).
	deadline time.Time
	bound    time.Duration
	state    atomic.Int32
}

const (
	reqPending int32 = iota
	reqTaken
	reqCancelled
)

// A batcher runs every write of the driver on its one writing connection,
// putting the writes that arrive while a transaction runs into the next
// transaction together (group commit): they share one BEGIN, one COMMIT and
// one fsync. Each write runs under its own savepoint, so one failing write
// does not undo the others. A write whose caller gave up before it started
// is dropped; once started, its caller waits for the outcome, so an error
// always means "not written" and nil always means "committed".
type batcher struct {
	d       *Driver
	reqs    chan *writeReq
	stop    chan struct{}
	stopped chan struct{}
}

func newBatcher(d *Driver) *batcher {
	b := &batcher{d: d, reqs: make(chan *writeReq), stop: make(chan struct{}), stopped: make(chan struct{})}
	go b.loop()
	return b
}

func (b *batcher) close() {
	close(b.stop)
	<-b.stopped
}

// do runs work in a write transaction and returns its error, or the
// transaction's. It waits for another process's lock at most the driver's
// lock timeout.
func (b *batcher) do(ctx context.Context, work func(*wtx) error) error {
	return b.doWithin(ctx, b.d.lockTimeout, work)
}

// doWithin is do with a bound of its own on the wait for the lock.
func (b *batcher) doWithin(ctx context.Context, bound time.Duration, work func(*wtx) error) error {
	r := &writeReq{ctx: ctx, work: work, done: make(chan error, 1), deadline: time.Now().Add(bound), bound: bound}
	// While the batcher waits for the lock for earlier writes, this one
	// waits for the batcher: within the same bound.
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case b.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return unavailable(bound, errors.New("the writer is still waiting for the database lock"))
	case <-b.stopped: // the driver was closed: no writer is left
		return backend.ErrClosed
	}
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		if r.state.CompareAndSwap(reqPending, reqCancelled) {
			return ctx.Err()
		}
		return <-r.done // it is running: its outcome decides
	}
}

func (b *batcher) loop() {
	defer close(b.stopped)
	var busySince time.Time // start of the current run of back-to-back transactions
	for {
		var batch []*writeReq
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		default:
			busySince = time.Time{} // idle: the run of transactions ended
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			case <-b.stop:
				return
			}
		}
		if busySince.IsZero() {
			busySince = time.Now()
		} else if time.Since(busySince) > holdBudget {
			time.Sleep(yieldFor) // let a waiting process take the lock
			busySince = time.Now()
		}
		batch = b.drain(batch)
		b.run(batch)
	}
}

// drainYields is how many times drain lets the other goroutines run to
// gather more writes for a batch.
const drainYields = 2

// drain adds to batch the writes waiting to be sent. Writers that are
// runnable but not yet at the channel (a CPU-bound server: their requests
// are being decoded) get a chance to arrive: each yield of the processor
// that brings more writes is worth one fsync and one WAL append of the
// pages they share. A lone writer on an idle process pays for the yields
// only (nothing else is runnable), not for a wait.
func (b *batcher) drain(batch []*writeReq) []*writeReq {
	yields := 0
	for len(batch) < maxBatch {
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
			continue
		default:
		}
		if yields == drainYields {
			break
		}
		yields++
		runtime.Gosched()
	}
	return batch
}

// run commits batch, retrying while another process holds the write lock.
func (b *batcher) run(batch []*writeReq) {
	live := batch[:0]
	for _, r := range batch {
		if r.state.CompareAndSwap(reqPending, reqTaken) {
			live = append(live, r)
		}
	}
	for len(live) > 0 {
		err := b.runTx(live)
		if err == nil {
			return
		}
		if !isBusy(err) {
			for _, r := range live {
				r.done <- err
			}
			return
		}
		// Another process holds the lock: poll for it, for the callers
		// still willing to wait.
		keep := live[:0]
		now := time.Now()
		for _, r := range live {
			switch {
			case r.ctx.Err() != nil:
				r.done <- fmt.Errorf("%w (gave up waiting for the database lock: %v)", r.ctx.Err(), err)
			case !now.Before(r.deadline):
				r.done <- unavailable(r.bound, err)
			default:
				keep = append(keep, r)
			}
		}
		live = keep
		time.Sleep(lockPoll)
	}
}

// runTx runs reqs in one transaction and delivers their outcomes. It
// returns an error, having delivered nothing, only when the transaction
// could not begin.
//
// A batch of several writes first runs them back to back, without the two
// savepoint statements per write: a write whose condition fails is not an
// error and changes nothing, and one whose own logic refuses to write
// (errRejected) has changed nothing either. Should a write fail otherwise
// (a statement's error), the transaction is rolled back and the batch runs
// again with each write under its own savepoint, so that the failure
// undoes only that write's changes: works may run more than once (as they
// do when the lock is busy).
func (b *batcher) runTx(reqs []*writeReq) error {
	if len(reqs) > 1 {
		if ran, err := b.tryTx(reqs, false); ran || err != nil {
			return err
		}
	}
	_, err := b.tryTx(reqs, true)
	return err
}

// tryTx runs reqs in one transaction, each under a savepoint when
// savepoints is set, and delivers their outcomes. Without savepoints it
// gives up, rolling back and delivering nothing, when a write fails after
// it changed something; ran then reports false. Its error is that of a
// transaction that could not begin.
func (b *batcher) tryTx(reqs []*writeReq, savepoints bool) (ran bool, _ error) {
	ctx := context.Background() // the batch serves several callers; each was checked before it started
	tx, err := b.d.w.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	w := &wtx{ctx: ctx, tx: tx, s: &b.d.ws}
	errs := make([]error, len(reqs))
	single := len(reqs) == 1
	for i, r := range reqs {
		if single || !savepoints {
			// errRejected comes before any change (Update); any other
			// error may come after some.
			if errs[i] = r.work(w); errs[i] != nil && errs[i] != errRejected && !single {
				_ = tx.Rollback()
				return false, nil
			}
			continue
		}
		if _, err := w.stmt(w.s.savepoint).ExecContext(ctx); err != nil {
			return true, b.abort(tx, reqs, err)
		}
		if errs[i] = r.work(w); errs[i] != nil {
			if _, err := w.stmt(w.s.rollback).ExecContext(ctx); err != nil {
				return true, b.abort(tx, reqs, err)
			}
		}
		if _, err := w.stmt(w.s.release).ExecContext(ctx); err != nil {
			return true, b.abort(tx, reqs, err)
		}
	}
	if single && errs[0] != nil {
		_ = tx.Rollback()
		reqs[0].done <- errs[0]
		return true, nil
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil || errs[i] == errRejected {
				errs[i] = fmt.Errorf("commit: %w", err)
			}
		}
	}
	for i, r := range reqs {
		r.done <- errs[i]
	}
	return true, nil
}

// abort rolls the whole batch back after a statement that manages
// savepoints failed, and reports the failure to every request.
func (b *batcher) abort(tx *sql.Tx, reqs []*writeReq, err error) error {
	_ = tx.Rollback()
	for _, r := range reqs {
		r.done <- fmt.Errorf("batch aborted: %w", err)
	}
	return nil
}
