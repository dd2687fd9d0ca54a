package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state"
)

// A stream is one open event stream, ended by Close.
type stream struct{ cancel context.CancelFunc }

// stream serves the namespace's change feed (Store.Watch) as server-sent
// events: one "message" per history event after ?after= or the
// Last-Event-ID a reconnecting browser sends, each with its ID, so that a
// reconnection resumes where the last one stopped without skipping any. A
// gap (events removed unread) is told as a "gap" event, and the stream ends.
func (c *Console) stream(w http.ResponseWriter, r *http.Request) {
	st, err := c.store(r)
	if err != nil {
		http.Error(w, "namespace: "+err.Error(), http.StatusBadRequest)
		return
	}
	pos := r.Header.Get("Last-Event-ID")
	if pos == "" {
		pos = r.URL.Query().Get("after")
	}
	var after int64
	if pos != "" {
		if after, err = strconv.ParseInt(pos, 10, 64); err != nil || after < 0 {
			http.Error(w, "after: must be an event id, got "+strconv.Quote(pos), http.StatusBadRequest)
			return
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	s := &stream{cancel: cancel}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		http.Error(w, "the console is shutting down", http.StatusServiceUnavailable)
		return
	}
	c.streams[s] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.streams, s)
		c.mu.Unlock()
	}()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprintf(w, "retry: 2000\n\n")
	_ = rc.Flush()

	// The watch runs in its own goroutine so that the heartbeats go on
	// while it waits.
	type item struct {
		e   state.Event
		err error
	}
	items := make(chan item)
	go func() {
		defer close(items)
		for e, err := range st.Watch(ctx, state.WatchQuery{After: after, Prefix: r.URL.Query().Get("prefix")}) {
			select {
			case items <- item{e, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	beat := time.NewTicker(c.o.Heartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			_ = rc.Flush()
		case it, ok := <-items:
			if !ok {
				return
			}
			if it.err != nil {
				if errors.Is(it.err, state.ErrHistoryGap) {
					_, _ = fmt.Fprintf(w, "event: gap\ndata: %s\n\n", strings.ReplaceAll(it.err.Error(), "\n", " "))
					_ = rc.Flush()
				}
				return
			}
			b, _ := json.Marshal(viewOf(it.e))
			if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", it.e.ID, b); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}
