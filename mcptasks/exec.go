package mcptasks

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/statesidecar/state"
)

// Why a task's call was stopped by this package rather than by the call
// itself. A call stopped for one of these reasons records nothing.
var (
	errShutdown  = errors.New("mcptasks: the process is shutting down")
	errLostClaim = errors.New("mcptasks: the claim on the task was lost to another worker")
	errEnded     = errors.New("mcptasks: the task was cancelled or expired")
)

// An execution is a task this process runs.
type execution struct {
	cancel context.CancelCauseFunc
}

// start runs task rec, just created, on this process: the replica that
// accepted the call. base is the request's context without its
// cancellation.
func (t *Tasks) start(base context.Context, rec *record) {
	t.spawn(base, rec.Run, rec.ID, false)
}

// spawn runs the task of run in a goroutine of its own, unless this
// process runs it already or is closing; takeover says the run was found
// by a sweep, its first worker gone.
func (t *Tasks) spawn(base context.Context, run, id string, takeover bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.running[id] != nil {
		return
	}
	ex := &execution{}
	t.running[id] = ex
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() {
			t.mu.Lock()
			delete(t.running, id)
			t.mu.Unlock()
		}()
		t.execute(base, ex, run, id, takeover)
	}()
}

// sweep looks, every SweepInterval (with jitter, so that replicas do not
// look at once), for task runs whose worker's claim expired, and runs them.
func (t *Tasks) sweep() {
	defer t.wg.Done()
	for {
		d := t.o.SweepInterval
		d += time.Duration(rand.Int64N(int64(d)/5+1)) - d/10
		select {
		case <-t.ctx.Done():
			return
		case <-time.After(d):
		}
		if err := t.sweepOnce(t.ctx); err != nil && t.ctx.Err() == nil {
			t.log.Warn("mcptasks: looking for tasks to take over failed", "err", err)
		}
	}
}

// sweepOnce starts every claimable task run: one whose worker's claim
// expired or was given back, or one created at least ClaimTTL ago and
// never claimed (its creator died before it could start it). It then
// deletes finished runs that their worker left behind.
func (t *Tasks) sweepOnce(ctx context.Context) error {
	q := state.RunQuery{Claimable: true, Limit: 100}
	for {
		page, err := t.st.DiscoverRuns(ctx, q)
		if err != nil {
			return err
		}
		now := t.now()
		for _, r := range page.Runs {
			if r.Status == state.StatusCreated && r.Attempt == 0 && now.Sub(r.CreatedAt) < t.o.ClaimTTL {
				continue // its creator is about to claim it
			}
			t.spawn(context.Background(), r.ID, r.Name, true)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	for _, st := range []state.Status{state.StatusDone, state.StatusFailed} {
		if err := t.deleteFinished(ctx, st); err != nil {
			return err
		}
	}
	return t.trimHistory(ctx)
}

// trimEvery is how often, at most, a sweep trims the task namespace's
// history.
const trimEvery = time.Minute

// trimHistory removes the task namespace's history older than
// HistoryMaxAge, at most once every trimEvery. The sweep runs in one
// goroutine, so t.trimmed needs no lock.
func (t *Tasks) trimHistory(ctx context.Context) error {
	now := t.now()
	if t.o.HistoryMaxAge < 0 || now.Sub(t.trimmed) < trimEvery {
		return nil
	}
	if _, err := t.st.TrimHistory(ctx, now.Add(-t.o.HistoryMaxAge)); err != nil {
		return err
	}
	t.trimmed = now
	return nil
}

// deleteFinished deletes the task runs in status st that a worker finished
// but did not delete (its process died in between): those whose task is
// finished or gone. Normally there are none, so this costs one listing.
func (t *Tasks) deleteFinished(ctx context.Context, st state.Status) error {
	q := state.RunQuery{Status: st, Limit: 100}
	for {
		page, err := t.st.DiscoverRuns(ctx, q)
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if !validID(r.Name) {
				continue // not a task's run
			}
			e, err := t.st.Get(ctx, taskKey(r.Name))
			switch {
			case errors.Is(err, state.ErrNotFound):
			case err != nil:
				return err
			default:
				rec, err := decodeRecord(e.Value)
				if err != nil || rec.Run != r.ID || !terminal(rec.Status) {
					continue
				}
			}
			if _, err := t.st.DeleteRun(ctx, r.ID, state.WithAgent(t.worker)); err != nil {
				return err
			}
		}
		if page.NextCursor == "" {
			return nil
		}
		q.Cursor = page.NextCursor
	}
}

// execute claims run (the run of task id) and, while the claim holds, runs
// the task's call and records its outcome.
func (t *Tasks) execute(base context.Context, ex *execution, run, id string, takeover bool) {
	claim, err := t.st.ClaimRun(t.ctx, run, t.worker, state.WithClaimTTL(t.o.ClaimTTL))
	if err != nil {
		if !errors.Is(err, state.ErrClaimed) && !errors.Is(err, state.ErrFinished) &&
			!errors.Is(err, state.ErrNotFound) && t.ctx.Err() == nil {
			t.log.Warn("mcptasks: claiming a task failed", "task_run", run, "err", err)
		}
		return
	}
	fence := state.WithFence(claim.Fence)
	e, err := t.st.Get(t.ctx, taskKey(id))
	if errors.Is(err, state.ErrNotFound) {
		// Expired, or the run of a task whose creation failed.
		t.finishRun(run, fence, false)
		return
	}
	if err != nil {
		t.giveBack(run)
		return
	}
	rec, err := decodeRecord(e.Value)
	if err != nil || rec.Run != run {
		t.log.Error("mcptasks: a task run has no task record of its own", "task_run", run, "err", err)
		t.finishRun(run, fence, false)
		return
	}
	if terminal(rec.Status) {
		t.finishRun(run, fence, true)
		return
	}
	if takeover || claim.Reclaimed {
		t.observe(EventTakenOver)
		t.log.Info("mcptasks: taking a task over", "task_run", run, "attempt", claim.Attempt)
	}
	if claim.Attempt > 1 {
		// Fence the previous worker out now, so that its next checkpoint or
		// result is refused rather than mixed with this attempt's.
		if rec, err = t.write(t.ctx, rec, claim.Fence, claim.Attempt, false, func(*record) {}); err != nil {
			t.endRun(run, fence, err)
			return
		}
	}

	if t.o.Context != nil {
		base = t.o.Context(base, rec.Owner)
	}
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	t.mu.Lock()
	ex.cancel = cancel
	t.mu.Unlock()
	ctx, cancelDeadline := context.WithDeadlineCause(ctx, rec.expiresAt(), errEnded)
	defer cancelDeadline()
	stop := context.AfterFunc(t.ctx, func() { cancel(errShutdown) })
	defer stop()
	exe := &Execution{TaskID: id, Attempt: claim.Attempt, ExpiresAt: rec.expiresAt(), t: t, rec: rec, fence: claim.Fence}
	ctx = context.WithValue(ctx, executionKey{}, exe)

	changed := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go t.heartbeat(ctx, cancel, done, run, claim.Fence)
	go t.watch(ctx, cancel, done, id, e.Version, changed)

	status, err := t.runCall(ctx, exe, rec, changed)
	switch {
	case err == nil && status == StatusFailed:
		t.finishRun(run, fence, false)
	case err == nil:
		t.finishRun(run, fence, true)
	case ctx.Err() != nil:
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errShutdown), errors.Is(cause, errLostClaim):
			// Another process runs it (again): give the claim back, in case
			// a late heartbeat claimed the run afresh.
			t.giveBack(run)
		case errors.Is(cause, errEnded):
			// Cancelled (its record says so) or expired (no record).
			_, gerr := t.st.Get(t.ctx, taskKey(id))
			if errors.Is(gerr, state.ErrNotFound) {
				t.finishRun(run, fence, false)
			} else {
				t.finishRun(run, fence, true)
			}
		}
		// Any other cause is not this package's: the claim is left to
		// expire, as a dead process leaves it.
	default:
		t.endRun(run, fence, err)
	}
}

// endRun finishes run after the task could not be written: it finished or
// expired meanwhile (the run ends), or the write failed (the claim is given
// back, for another attempt).
func (t *Tasks) endRun(run string, fence state.FinishOption, err error) {
	switch {
	case errors.Is(err, errFinished):
		t.finishRun(run, fence, true)
	case errors.Is(err, errNoTask):
		t.finishRun(run, fence, false)
	case errors.Is(err, errStale):
	default:
		if t.ctx.Err() == nil {
			t.log.Warn("mcptasks: recording a task failed", "task_run", run, "err", err)
		}
		t.giveBack(run)
	}
}

// finishRun finishes run (done, or failed) and deletes it: a run is
// finished once its task is finished or gone, and then records nothing the
// task needs (the task's record keeps its outcome, fence and attempt until
// it expires). A worker that still holds an older claim finds no run to
// heartbeat and stops. A run left finished by a process that died between
// the two calls is deleted by a later sweep.
func (t *Tasks) finishRun(run string, fence state.FinishOption, done bool) {
	var err error
	if done {
		_, err = t.st.CompleteRun(t.ctx, run, fence)
	} else {
		_, err = t.st.FailRun(t.ctx, run, fence)
	}
	if err != nil && !errors.Is(err, state.ErrFinished) {
		return // not ours to finish (a successor's claim), or a failed write: the sweep sees it again
	}
	if _, err := t.st.DeleteRun(t.ctx, run, state.WithAgent(t.worker)); err != nil && t.ctx.Err() == nil {
		t.log.Warn("mcptasks: deleting a finished task run failed", "task_run", run, "err", err)
	}
}

// giveBack releases this process's claim on run, so that another process
// takes the task over at its next sweep rather than when the claim expires.
func (t *Tasks) giveBack(run string) {
	ctx, cancel := context.WithTimeout(context.Background(), t.o.ClaimTTL)
	defer cancel()
	_, _ = t.st.ReleaseRun(ctx, run, t.worker)
}

// heartbeat extends the claim on run every third of ClaimTTL until done is
// closed; once the claim is lost (another worker took it, or no heartbeat
// got through before it expired) it cancels the call with errLostClaim.
func (t *Tasks) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}, run string, fence int64) {
	every := t.o.ClaimTTL / 3
	last := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		hctx, hcancel := context.WithTimeout(t.ctx, every)
		c, err := t.st.ClaimRun(hctx, run, t.worker, state.WithClaimTTL(t.o.ClaimTTL))
		hcancel()
		switch {
		case err == nil && c.Fence == fence:
			last = time.Now()
		case err == nil:
			// The claim had expired and this heartbeat claimed the run
			// afresh: someone may have run the task meanwhile.
			cancel(errLostClaim)
			return
		case errors.Is(err, state.ErrClaimed), errors.Is(err, state.ErrFinished), errors.Is(err, state.ErrNotFound):
			cancel(errLostClaim)
			return
		case time.Since(last) >= t.o.ClaimTTL-every/2:
			// The claim may have expired: another worker may be running
			// the task; stop rather than run it twice at once.
			t.log.Warn("mcptasks: heartbeats failing, giving the task up", "task_run", run, "err", err)
			cancel(errLostClaim)
			return
		}
	}
}

// watch follows task id's record from version after, without polling
// (the store's WaitKey): it cancels the call when the task is cancelled or
// expires, and signals changed on every other change (answers to input
// requests).
func (t *Tasks) watch(ctx context.Context, cancel context.CancelCauseFunc, done <-chan struct{}, id string, after int64, changed chan<- struct{}) {
	for {
		e, err := t.st.WaitKey(ctx, taskKey(id), after)
		select {
		case <-done:
			return
		default:
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, state.ErrClosed) {
				cancel(errShutdown)
				return
			}
			select { // a backend hiccup: try again shortly
			case <-ctx.Done():
				return
			case <-time.After(t.o.ClaimTTL / 10):
			}
			continue
		}
		if !e.Found() {
			cancel(errEnded)
			return
		}
		after = e.Version
		rec, err := decodeRecord(e.Value)
		if err == nil && terminal(rec.Status) {
			cancel(errEnded)
			return
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}
