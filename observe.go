package state

import (
	"context"
	"time"
)

// An Observer is told about every call a Store makes to its backend: the
// call's name ("get", "get_many", "list", "count", "commit", "history",
// "reset", "update", "claim", "lease", "sweep", "trim", "ping",
// "server_time" or "check_config"), how long it took and its error (a
// backend.ErrNotFound from "get" is an answer, not a failure). Use it for
// metrics; it must be fast and safe for concurrent use. Every backend call
// passes through one place in the Store (gate.go), which tells the
// Observer and the Tracer alike.
type Observer func(call string, took time.Duration, err error)

// A Tracer brackets every call a Store makes to its backend with a context,
// for distributed tracing: package otelstate gives each call an
// OpenTelemetry span. Unlike an Observer it sees the call's context (so a
// span of the caller becomes the parent) and what the call works on. Set
// it in Options.Tracer; without one a Store makes no extra call at all.
type Tracer interface {
	// StartCall is called before the backend call c; the call runs with the
	// returned context, and end is called with the call's error once it
	// returned. Two errors it is given are answers, not failures: a
	// backend.ErrNotFound from "get", and ErrConflict from a "commit" whose
	// condition failed (the Store then retries or reports the conflict). It
	// must be safe for concurrent use.
	StartCall(ctx context.Context, c BackendCall) (_ context.Context, end func(err error))
}

// A BackendCall describes one call of a Store to its backend, as a Tracer
// sees it: never a key or a value.
type BackendCall struct {
	// Op is the call's name, one an Observer gets: "get", "get_many",
	// "list", "count", "commit", "history", "reset", "update", "claim",
	// "lease", "sweep", "trim", "ping", "server_time" or "check_config".
	Op string
	// Backend is the driver's name, such as "sqlite" or "redis".
	Backend string
	// Namespace is the namespace the call works in; "" for a sweep, a
	// ping, a clock read or a configuration check, which work in no
	// namespace in particular.
	Namespace string
	// Items is the number of keys a get_many or update reads or the number
	// of writes a commit applies; 0 for the other calls.
	Items int
}
