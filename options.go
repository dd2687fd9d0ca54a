package state

import (
	"log/slog"
	"time"
)

// Options configure a Store. A nil *Options means all defaults.
type Options struct {
	// Clock decides "now". Defaults to the process clock, except for drivers
	// shared by several processes (Redis), where the server's clock decides
	// expiry so that every process agrees. Setting Clock makes the store pass
	// its time to every backend, which is what tests want.
	Clock Clock
	// Logger receives background errors (sweeping) and, when the store
	// starts, warnings about a backend configured to lose data (Redis
	// without persistence, say). Defaults to discarding.
	Logger *slog.Logger
	// Namespace is the namespace the store starts in. Defaults to "default".
	Namespace string
	// Limits bound the size of inputs. Zero fields take their defaults.
	Limits Limits
	// ClaimTTL is how long a workflow claim lives without a heartbeat when a
	// claim does not say. Defaults to 10 minutes. Like every TTL, it is
	// rounded up to a whole number of milliseconds.
	ClaimTTL time.Duration
	// SweepInterval is how often expired records and old history are
	// physically removed in the background. Defaults to 1 minute; a negative
	// value disables the background sweeper (Sweep still works).
	SweepInterval time.Duration
	// ClockSyncInterval is how often a store whose backend's server decides
	// the time (Redis, without an injected Clock) reads the server's clock
	// again to keep the timestamps it writes in step. Defaults to 1 minute;
	// a negative value reads it once, when the store is created.
	ClockSyncInterval time.Duration
	// SweepGrace keeps an expired record this long before it is removed, so
	// that a lease acquired after its holder's lease expired is recorded as a
	// takeover. Expired records are invisible at once regardless. Defaults to
	// 1 minute.
	SweepGrace time.Duration
	// HistoryMaxAge removes history entries older than this. Defaults to 7
	// days; a negative value keeps entries regardless of age.
	HistoryMaxAge time.Duration
	// HistoryMaxEvents keeps at most this many newest history entries per
	// namespace. Defaults to 100,000; a negative value means no limit.
	HistoryMaxEvents int64
	// Observer, if set, is told about every backend call (for metrics).
	Observer Observer
	// Tracer, if set, brackets every backend call with a context (for
	// tracing: package otelstate gives each call a span).
	Tracer Tracer
	// LeasePollInterval is the longest a blocking AcquireLease, or a Once
	// waiting for another caller's effect, waits before trying again.
	// Defaults to 100 milliseconds.
	LeasePollInterval time.Duration
	// IdempotencyWindow is how long an idempotency key of CreateRun
	// (WithIdempotencyKey) keeps returning the run it made, and how long
	// Once keeps a recorded result unless the call says (WithTTL).
	// Defaults to 24 hours.
	IdempotencyWindow time.Duration
	// Encryption, if set, turns on encryption at rest (docs/encryption.md):
	// values, step outputs, session contexts, effect results and history
	// payloads are sealed before they reach the backend, with a data key
	// set per namespace (and per subject, WithSubject) that the Encryption
	// keeps wrapped by its key-encryption key. Package encryption makes
	// one from a key URL. Off (nil) by default: everything is stored in
	// plaintext.
	Encryption Encryption
	// WaitPollInterval is how often a namespace that someone waits on
	// (Watch, WaitKey, WaitRun) is checked for changes made by other
	// processes when the backend cannot notify them (backend.Notifier);
	// with a backend that can, it is checked every ten intervals, as a
	// safety net for a lost notification. Writes through the same Store
	// wake their waiters at once either way. Defaults to 100 milliseconds.
	WaitPollInterval time.Duration
}

// Limits bound the size of inputs; larger inputs are rejected with a
// *FieldError. Zero fields take their defaults.
type Limits struct {
	// MaxKeyBytes bounds keys, run ids, resource ids and session ids.
	// Defaults to 1024.
	MaxKeyBytes int
	// MaxIDBytes bounds agent and holder ids, workflow names and tag keys and
	// values. Defaults to 256.
	MaxIDBytes int
	// MaxValueBytes bounds values, step outputs and session contexts (as
	// JSON). Defaults to 1 MiB.
	MaxValueBytes int
	// MaxTags bounds the number of tags of a run. Defaults to 32.
	MaxTags int
	// MaxBatch bounds the number of items of a batch. Defaults to 1000.
	MaxBatch int
}

// Defaults of Options and Limits.
const (
	DefaultNamespace         = "default"
	DefaultClaimTTL          = 10 * time.Minute
	DefaultSweepInterval     = time.Minute
	DefaultSweepGrace        = time.Minute
	DefaultClockSyncInterval = time.Minute
	DefaultHistoryMaxAge     = 7 * 24 * time.Hour
	DefaultHistoryMaxEvents  = 100_000
	DefaultLeasePoll         = 100 * time.Millisecond
	DefaultIdempotencyWindow = 24 * time.Hour
	DefaultWaitPoll          = 100 * time.Millisecond
	DefaultMaxKeyBytes       = 1024
	DefaultMaxIDBytes        = 256
	DefaultMaxValueBytes     = 1 << 20
	DefaultMaxTags           = 32
	DefaultMaxBatch          = 1000
)

func (o *Options) withDefaults() Options {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Namespace == "" {
		r.Namespace = DefaultNamespace
	}
	if r.ClaimTTL <= 0 {
		r.ClaimTTL = DefaultClaimTTL
	}
	r.ClaimTTL = roundTTL(r.ClaimTTL)
	if r.SweepInterval == 0 {
		r.SweepInterval = DefaultSweepInterval
	}
	if r.ClockSyncInterval == 0 {
		r.ClockSyncInterval = DefaultClockSyncInterval
	}
	if r.SweepGrace <= 0 {
		r.SweepGrace = DefaultSweepGrace
	}
	if r.HistoryMaxAge == 0 {
		r.HistoryMaxAge = DefaultHistoryMaxAge
	}
	if r.HistoryMaxEvents == 0 {
		r.HistoryMaxEvents = DefaultHistoryMaxEvents
	}
	if r.LeasePollInterval <= 0 {
		r.LeasePollInterval = DefaultLeasePoll
	}
	if r.IdempotencyWindow <= 0 {
		r.IdempotencyWindow = DefaultIdempotencyWindow
	}
	r.IdempotencyWindow = roundTTL(r.IdempotencyWindow)
	if r.WaitPollInterval <= 0 {
		r.WaitPollInterval = DefaultWaitPoll
	}
	l := &r.Limits
	if l.MaxKeyBytes <= 0 {
		l.MaxKeyBytes = DefaultMaxKeyBytes
	}
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = DefaultMaxIDBytes
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultMaxValueBytes
	}
	if l.MaxTags <= 0 {
		l.MaxTags = DefaultMaxTags
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	return r
}
