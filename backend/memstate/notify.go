package memstate

import (
	"context"
	"sync"

	"github.com/statesidecar/state/backend"
)

var (
	_ backend.Notifier           = (*Driver)(nil)
	_ backend.ConsecutiveHistory = (*Driver)(nil)
)

// listeners are the functions Notify calls, by registration.
type listeners struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(ns string)
}

// Notify implements backend.Notifier: every commit that writes and every
// Reset calls fn with its namespace, in the committing goroutine, until
// ctx ends.
func (d *Driver) Notify(ctx context.Context, fn func(ns string)) error {
	l := &d.listeners
	l.mu.Lock()
	if l.fns == nil {
		l.fns = map[int]func(string){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	l.mu.Unlock()
	<-ctx.Done()
	l.mu.Lock()
	delete(l.fns, id)
	l.mu.Unlock()
	return ctx.Err()
}

// changed tells the listeners that ns changed.
func (d *Driver) changed(ns string) {
	l := &d.listeners
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, fn := range l.fns {
		fn(ns)
	}
}

// ConsecutiveHistory implements backend.ConsecutiveHistory: event ids
// count up by one per namespace, Reset included, under one lock.
func (d *Driver) ConsecutiveHistory() bool { return true }
