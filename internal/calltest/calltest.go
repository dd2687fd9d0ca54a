// Package calltest records the backend calls a store makes, for tests
// that check which calls served an operation (a driver's fast path alone,
// or the portable code after it).
package calltest

import (
	"context"
	"slices"
	"sync"

	"github.com/statesidecar/state"
)

// A Log is a state.Tracer that records the name of every backend call
// (BackendCall.Op) it brackets. It is safe for concurrent use.
type Log struct {
	mu  sync.Mutex
	ops []string
}

// StartCall implements state.Tracer.
func (l *Log) StartCall(ctx context.Context, c state.BackendCall) (context.Context, func(error)) {
	l.mu.Lock()
	l.ops = append(l.ops, c.Op)
	l.mu.Unlock()
	return ctx, func(error) {}
}

// During calls f and returns the backend calls recorded meanwhile, but
// for the store's one background check of the backend's configuration
// ("check_config"), which may fall inside the window without being f's.
func (l *Log) During(f func()) []string {
	l.mu.Lock()
	n := len(l.ops)
	l.mu.Unlock()
	f()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(l.ops[n:]), func(op string) bool { return op == "check_config" })
}
