package state

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// WaitKey waits until the entry at key is newer than version after and
// returns it: once a write gives it a version greater than after, or, when
// after is not 0, once it is deleted or expires (the Entry returned then
// has only Key set: Found reports false). With after 0 it waits for the key
// to exist. It returns at once when that already holds.
//
// It does not poll: writes through this Store wake it at once, and writes
// by other processes as soon as the backend tells (backend.Notifier) or,
// for a backend that cannot, within Options.WaitPollInterval. When ctx ends
// first it returns ctx's error (context.DeadlineExceeded for a timeout);
// when the store is closed, ErrClosed.
func (s *Store) WaitKey(ctx context.Context, key string, after int64) (Entry, error) {
	e, err := s.waitKey(ctx, key, after)
	return e, wrap("kv.wait", key, err)
}

func (s *Store) waitKey(ctx context.Context, key string, after int64) (Entry, error) {
	if err := checkKey("key", key, s.c.opts.Limits.MaxKeyBytes); err != nil {
		return Entry{}, err
	}
	if after < 0 {
		return Entry{}, invalid("after_version", "must be 0 (absent) or a version, got %d", after)
	}
	rk := layout.KV(key)
	check := func() (Entry, bool, time.Time, error) {
		r, err := s.getRecord(ctx, "key", key, rk)
		switch {
		case errors.Is(err, backend.ErrNotFound):
			return Entry{Key: key}, after > 0, time.Time{}, nil
		case err != nil:
			return Entry{}, false, time.Time{}, err
		}
		return entryOf(key, r), r.Revision > after, r.ExpiresAt, nil
	}
	match := func(e backend.Event) bool { return e.Key == key && strings.HasPrefix(e.Op, "kv.") }
	return waitFor(ctx, s, match, check)
}

// A RunCondition tells WaitRunFunc whether a run is what it waits for.
type RunCondition func(Run) bool

// WaitRun waits until the run with id is in one of the statuses until
// (done or failed when until is empty) and returns it; at once when it
// already is. It returns an error matching ErrNotFound when the run does
// not exist (or stops existing: a Reset), ctx's error when ctx ends first
// and ErrClosed when the store is closed. Like WaitKey it does not poll.
func (s *Store) WaitRun(ctx context.Context, id string, until ...Status) (Run, error) {
	for _, st := range until {
		if !st.Valid() {
			return Run{}, wrap("workflow.wait", id, invalid("until", "%q is not a status (waiting, created, claimed, running, done or failed)", st))
		}
	}
	r, err := s.waitRun(ctx, id, untilStatus(until), func(e backend.Event) bool {
		return e.Key == id && strings.HasPrefix(e.Op, "workflow.")
	})
	return r, wrap("workflow.wait", id, err)
}

// WaitRunFunc waits until cond holds for the run with id and returns it,
// as WaitRun does. cond is called with the run as it is now, then again
// after every change of a workflow run of the namespace (any run, not only
// this one, so that cond may look beyond it); it must be fast and must not
// call the store.
func (s *Store) WaitRunFunc(ctx context.Context, id string, cond RunCondition) (Run, error) {
	if cond == nil {
		return Run{}, wrap("workflow.wait", id, invalid("cond", "must not be nil"))
	}
	r, err := s.waitRun(ctx, id, cond, func(e backend.Event) bool { return strings.HasPrefix(e.Op, "workflow.") })
	return r, wrap("workflow.wait", id, err)
}

// ChildrenFinished is a RunCondition for WaitRunFunc: it holds once the run
// has children (WithParent) and every one of them is done or failed. A
// parent created WithJoin need not wait for it: its last child's finish
// turns it to created in the same commit, so WaitRun(ctx, id, StatusCreated)
// returns when it can be claimed. ChildrenFinished is for a parent that does
// not join, such as one whose own agent oversees its children.
func ChildrenFinished(r Run) bool {
	if len(r.Children) == 0 {
		return false
	}
	for st, n := range r.Children {
		if n > 0 && !st.Finished() {
			return false
		}
	}
	return true
}

// untilStatus is the condition of WaitRun.
func untilStatus(until []Status) RunCondition {
	return func(r Run) bool {
		if len(until) == 0 {
			return r.Status.Finished()
		}
		for _, st := range until {
			if r.Status == st {
				return true
			}
		}
		return false
	}
}

func (s *Store) waitRun(ctx context.Context, id string, cond RunCondition, match func(backend.Event) bool) (Run, error) {
	if err := s.checkRunID(id); err != nil {
		return Run{}, err
	}
	check := func() (Run, bool, time.Time, error) {
		r, err := s.getRun(ctx, id)
		if err != nil {
			return Run{}, false, time.Time{}, err
		}
		return r, cond(r), time.Time{}, nil
	}
	return waitFor(ctx, s, match, check)
}

// waitFor calls check until it reports done, an error, ctx ends or the
// store closes. Before waiting it subscribes to the events match accepts
// and checks again, so that no write between the check and the wait is
// missed; after, it checks on every wake, at the store clock's time check
// gave (an expiry), and now and then on its own.
func waitFor[T any](ctx context.Context, s *Store, match func(backend.Event) bool, check func() (T, bool, time.Time, error)) (T, error) {
	v, done, at, err := check()
	if err != nil || done {
		return v, ctxErr(ctx, err)
	}
	if err := ctx.Err(); err != nil {
		return v, err
	}
	w, err := s.c.hub.subscribe(ctx, s.ns, match)
	if err != nil {
		return v, err
	}
	defer s.c.hub.unsubscribe(w)
	for {
		v, done, at, err = check()
		if err != nil || done {
			return v, ctxErr(ctx, err)
		}
		if err := s.c.hub.wait(ctx, w, at); err != nil {
			var zero T
			return zero, err
		}
	}
}

// ctxErr returns ctx's error when ctx ended and err is not nil: a call cut
// by a deadline reports the deadline, whatever the backend made of it.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
