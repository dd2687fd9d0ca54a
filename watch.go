package state

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
)

// ErrHistoryGap is yielded by Watch when events after the watcher's
// position were removed before it read them (a Reset, or history retention:
// Options.HistoryMaxEvents, HistoryMaxAge): the watcher missed changes and
// should read the state it follows again, then watch from the newest event.
var ErrHistoryGap = errors.New("history events were removed before they were read")

// A WatchQuery selects what Watch delivers.
type WatchQuery struct {
	// After is the ID of the last event seen: Watch delivers the events
	// after it. 0 starts at the oldest event kept.
	After int64
	// Prefix keeps only the events whose Key starts with it (literal, like
	// List's prefix): keys of entries, run ids, lease resources and session
	// ids alike. "" keeps every event.
	Prefix string
}

// Watch yields the namespace's history events after q.After that match
// q, in ID order (the order of the writes), as they are appended, until ctx
// ends or the loop stops. It never skips one: to resume after a break, watch
// again with After set to the ID of the last event handled. Events appended
// by one write are yielded together, at once for writes through this
// Store, as soon as the backend tells for other processes' writes
// (backend.Notifier) and otherwise within Options.WaitPollInterval.
//
// An error ends the sequence: ctx's error when ctx ends, ErrClosed when the
// store is closed, an error matching ErrHistoryGap when events after the
// position were removed unread (only backends with consecutive event IDs,
// backend.ConsecutiveHistory, can tell; memory, SQLite and Redis do), or
// the backend's error.
func (s *Store) Watch(ctx context.Context, q WatchQuery) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		err := s.watch(ctx, q, yield)
		if err != nil {
			yield(Event{}, wrap("history.watch", q.Prefix, err))
		}
	}
}

// watch yields events until yield returns false (nil) or an error.
func (s *Store) watch(ctx context.Context, q WatchQuery, yield func(Event, error) bool) error {
	if q.After < 0 {
		return invalid("after", "must not be negative")
	}
	if len(q.Prefix) > s.c.opts.Limits.MaxKeyBytes {
		return invalid("prefix", "is %d bytes long, the limit is %d", len(q.Prefix), s.c.opts.Limits.MaxKeyBytes)
	}
	w, err := s.c.hub.subscribe(ctx, s.ns, func(e backend.Event) bool { return strings.HasPrefix(e.Key, q.Prefix) })
	if err != nil {
		return err
	}
	defer s.c.hub.unsubscribe(w)
	after := q.After
	for {
		evs, err := s.c.eventsSince(ctx, s.ns, after)
		if err != nil {
			return ctxErr(ctx, err)
		}
		if len(evs) > 0 && after > 0 && s.c.hub.consecutive && evs[0].ID != after+1 {
			return ErrHistoryGap
		}
		for _, e := range evs {
			after = e.ID
			if strings.HasPrefix(e.Key, q.Prefix) && !yield(eventOf(e), nil) {
				return nil
			}
		}
		if len(evs) == 0 {
			if err := s.c.hub.wait(ctx, w, time.Time{}); err != nil {
				return err
			}
		}
	}
}
