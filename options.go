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
	// LeasePollInterval is the longest a blocking Acquire, or a Once
	// waiting for another caller's effect, waits before trying again.
	// Defaults to 100 milliseconds.
	LeasePollInterval time.Duration
	// IdempotencyWindow is how long an idempotency key of CreateRun
	// (WithIdempotencyKey) keeps returning the run it made, and how long
	// Once keeps a recorded result unless the call says (WithTTL).
	// Defaults to 24 hours.
	IdempotencyWindow time.Duration
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

// An Option configures a single call. Each method's documentation lists the
// options it honours; any other option is rejected with a *FieldError naming
// it (see honours.go), so that an option never silently does nothing.
type Option func(*callOptions)

type callOptions struct {
	set       optionSet // which options were given
	ttl       time.Duration
	agent     string
	version   int64
	versionOK bool
	claimTTL  time.Duration
	fence     int64
	fenceSet  bool
	status    Status
	limit     int
	cursor    string
	parent    string
	join      bool
	idem      string
}

// WithTTL makes a key-value entry or session expire ttl after the write. It
// must be at least one millisecond; a TTL that is not a whole number of
// milliseconds is rounded up to the next one. Without it a write clears an
// earlier TTL.
func WithTTL(ttl time.Duration) Option {
	return func(o *callOptions) { o.set |= optTTL; o.ttl = ttl }
}

// WithAgent records who writes (Set, Delete, SetMany, SaveSession,
// DeleteSession, CreateRun) and, for Checkpoint, CompleteRun and FailRun,
// requires that this agent holds the run's live claim. An agent that
// restarted and reuses the holder's id passes this check: only WithFence
// tells them apart.
func WithAgent(agentID string) Option {
	return func(o *callOptions) { o.set |= optAgent; o.agent = agentID }
}

// IfVersion makes Set, Delete, SaveSession and DeleteSession a
// compare-and-set: the write happens only if the current version equals
// version, where 0 means the key must be absent. Otherwise the call fails
// with a *ConflictError naming the current version.
func IfVersion(version int64) Option {
	return func(o *callOptions) { o.set |= optVersion; o.version, o.versionOK = version, true }
}

// WithClaimTTL sets how long a claim lives without a heartbeat (ClaimRun).
// Like WithTTL, it is rounded up to a whole number of milliseconds.
func WithClaimTTL(ttl time.Duration) Option {
	return func(o *callOptions) { o.set |= optClaimTTL; o.claimTTL = ttl }
}

// WithFence requires, for Checkpoint, CompleteRun and FailRun, that the
// caller's claim still carries this fence token: a worker whose claim
// expired and was taken over cannot overwrite its successor, and is not
// told that finishing an already finished run succeeded. Every claim has a
// fence of its own, so this also refuses an agent that restarted and
// reuses the holder's id.
func WithFence(fence int64) Option {
	return func(o *callOptions) { o.set |= optFence; o.fence, o.fenceSet = fence, true }
}

// WithStatus makes a Checkpoint finish the run as StatusDone or
// StatusFailed in the same atomic write.
func WithStatus(s Status) Option {
	return func(o *callOptions) { o.set |= optStatus; o.status = s }
}

// WithLimit bounds the size of a page (List, ListRuns).
func WithLimit(n int) Option {
	return func(o *callOptions) { o.set |= optLimit; o.limit = n }
}

// WithCursor continues a listing after the page that returned cursor.
func WithCursor(cursor string) Option {
	return func(o *callOptions) { o.set |= optCursor; o.cursor = cursor }
}

// WithParent creates a run (CreateRun) as a child of run parentID, which
// must exist and be open (ErrParentNotFound, ErrParentFinished otherwise).
// The child is listed by DiscoverRuns with RunQuery.ParentID, and counted
// in its parent's Run.Children.
func WithParent(parentID string) Option {
	return func(o *callOptions) { o.set |= optParent; o.parent = parentID }
}

// WithJoin creates a join parent (CreateRun): a run that waits
// (StatusWaiting, not claimable) until it has children and every one of
// them has finished, done or failed; then it is created and claimable like
// a fresh run, so that exactly one aggregator claims it. See children.go
// for children created after the join released.
func WithJoin() Option {
	return func(o *callOptions) { o.set |= optJoin; o.join = true }
}

// WithIdempotencyKey makes CreateRun idempotent: while the key is
// remembered (Options.IdempotencyWindow, per namespace), a CreateRun with
// the same key creates nothing and returns the run the first one made,
// with Run.Replayed set. The key identifies the request: the name, tags
// and parent of a replay are not compared with the first call's.
func WithIdempotencyKey(key string) Option {
	return func(o *callOptions) { o.set |= optIdem; o.idem = key }
}
