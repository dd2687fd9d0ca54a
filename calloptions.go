package state

import "time"

// Per-call options, checked by the compiler.
//
// Every method that takes options accepts only the options it honours: its
// options parameter has an interface type of its own (SetOption for Set,
// DeleteOption for Delete, ...), and an option that several methods honour
// returns a type that is each of theirs (WithAgent returns an AgentOption,
// which is a SetOption, a DeleteOption, a CheckpointOption and more). This is
// the OpenTelemetry Go API's pattern (trace.WithTimestamp is both a
// SpanStartOption and a SpanEndOption):
//
//	st.Set(ctx, k, v, state.WithTTL(time.Minute)) // compiles
//	st.Set(ctx, k, v, state.WithFence(3))         // does not: a FenceOption is not a SetOption
//
// The interfaces have unexported methods, so that only this package makes
// options. A nil option is skipped.

// option is what every per-call option does: record itself in the options
// of one call.
type option interface{ apply(*callOptions) }

// SetOption is an option of Set and SetSession: WithTTL, WithAgent,
// IfVersion and WithSubject.
type SetOption interface {
	option
	setOption()
}

// SetManyOption is an option of SetMany: WithTTL, WithAgent and
// WithSubject.
type SetManyOption interface {
	option
	setManyOption()
}

// DeleteOption is an option of Delete and DeleteSession: WithAgent and
// IfVersion.
type DeleteOption interface {
	option
	deleteOption()
}

// DeleteRunOption is an option of DeleteRun: WithAgent.
type DeleteRunOption interface {
	option
	deleteRunOption()
}

// ListOption is an option of List and ListRuns: WithLimit and WithCursor.
type ListOption interface {
	option
	listOption()
}

// CreateOption is an option of CreateRun: WithAgent, WithParent, WithJoin,
// WithIdempotencyKey and WithSubject.
type CreateOption interface {
	option
	createOption()
}

// ClaimOption is an option of ClaimRun: WithClaimTTL.
type ClaimOption interface {
	option
	claimOption()
}

// CheckpointOption is an option of CheckpointRun: WithAgent, WithFence and
// WithStatus.
type CheckpointOption interface {
	option
	checkpointOption()
}

// FinishOption is an option of CompleteRun and FailRun: WithAgent and
// WithFence.
type FinishOption interface {
	option
	finishOption()
}

// OnceOption is an option of Once: WithTTL (how long the result is kept)
// and WithClaimTTL (how long the caller running the effect holds it).
type OnceOption interface {
	option
	onceOption()
}

// TTLOption is the option WithTTL returns, honoured by Set, SetSession,
// SetMany and Once.
type TTLOption interface {
	SetOption
	SetManyOption
	OnceOption
}

// AgentOption is the option WithAgent returns, honoured by Set,
// SetSession, SetMany, Delete, DeleteSession, DeleteRun, CreateRun,
// CheckpointRun, CompleteRun and FailRun.
type AgentOption interface {
	SetOption
	SetManyOption
	DeleteOption
	DeleteRunOption
	CreateOption
	CheckpointOption
	FinishOption
}

// VersionOption is the option IfVersion returns, honoured by Set,
// SetSession, Delete and DeleteSession.
type VersionOption interface {
	SetOption
	DeleteOption
}

// ClaimTTLOption is the option WithClaimTTL returns, honoured by ClaimRun
// and Once.
type ClaimTTLOption interface {
	ClaimOption
	OnceOption
}

// FenceOption is the option WithFence returns, honoured by CheckpointRun,
// CompleteRun and FailRun.
type FenceOption interface {
	CheckpointOption
	FinishOption
}

// WithTTL makes a key-value entry or session expire ttl after the write. It
// must be at least one millisecond; a TTL that is not a whole number of
// milliseconds is rounded up to the next one. Without it a write clears an
// earlier TTL. For Once, it is how long the recorded result is kept.
func WithTTL(ttl time.Duration) TTLOption { return ttlOption(ttl) }

// WithAgent records who writes (Set, Delete, SetMany, SetSession,
// DeleteSession, DeleteRun, CreateRun) and, for CheckpointRun, CompleteRun and FailRun,
// requires that this agent holds the run's live claim. An agent that
// restarted and reuses the holder's id passes this check: only WithFence
// tells them apart.
func WithAgent(agentID string) AgentOption { return agentOption(agentID) }

// IfVersion makes Set, Delete, SetSession and DeleteSession a
// compare-and-set: the write happens only if the current version equals
// version, where 0 means the key must be absent. Otherwise the call fails
// with a *ConflictError naming the current version.
func IfVersion(version int64) VersionOption { return versionOption(version) }

// WithClaimTTL sets how long a claim lives without a heartbeat (ClaimRun),
// or how long the caller running an effect holds it (Once). Like WithTTL,
// it is rounded up to a whole number of milliseconds.
func WithClaimTTL(ttl time.Duration) ClaimTTLOption { return claimTTLOption(ttl) }

// WithFence requires, for CheckpointRun, CompleteRun and FailRun, that the
// caller's claim still carries this fence token: a worker whose claim
// expired and was taken over cannot overwrite its successor, and is not
// told that finishing an already finished run succeeded. Every claim has a
// fence of its own, so this also refuses an agent that restarted and
// reuses the holder's id.
func WithFence(fence int64) FenceOption { return fenceOption(fence) }

// WithStatus makes a CheckpointRun finish the run as StatusDone or
// StatusFailed in the same atomic write.
func WithStatus(s Status) CheckpointOption { return statusOption(s) }

// WithLimit bounds the size of a page (List, ListRuns).
func WithLimit(n int) ListOption { return limitOption(n) }

// WithCursor continues a listing (List, ListRuns) after the page that
// returned cursor.
func WithCursor(cursor string) ListOption { return cursorOption(cursor) }

// WithParent creates a run (CreateRun) as a child of run parentID, which
// must exist and be open (ErrParentNotFound, ErrParentFinished otherwise).
// The child is listed by DiscoverRuns with RunQuery.ParentID, and counted
// in its parent's Run.Children.
func WithParent(parentID string) CreateOption { return parentOption(parentID) }

// WithJoin creates a join parent (CreateRun): a run that waits
// (StatusWaiting, not claimable: ClaimRun fails with ErrWaiting) until it
// has children and every one of them has finished, done or failed; the
// write that finishes the last one makes it created, claimable like a
// fresh run, so that exactly one aggregator claims it.
//
// A child created after the release while nobody has claimed the parent
// yet sends it back to waiting (history: workflow.rejoin); once an
// aggregator has claimed it, the parent takes no more children
// (ErrParentFinished). Create every child before any of them can finish
// to keep the join from releasing between two of them. A waiting parent
// can still be finished directly (CompleteRun, FailRun) to abandon the
// fan-out.
func WithJoin() CreateOption { return joinOption{} }

// WithIdempotencyKey makes CreateRun idempotent: while the key is
// remembered (Options.IdempotencyWindow, per namespace), a CreateRun with
// the same key creates nothing and returns the run the first one made,
// with Run.Replayed set. The key identifies the request: the name, tags
// and parent of a replay are not compared with the first call's.
func WithIdempotencyKey(key string) CreateOption { return idemOption(key) }

// The options, one type each, so that an option is of no interface but
// the ones its constructor promises, even to a type assertion.
type (
	ttlOption      time.Duration
	agentOption    string
	versionOption  int64
	claimTTLOption time.Duration
	fenceOption    int64
	statusOption   Status
	limitOption    int
	cursorOption   string
	parentOption   string
	joinOption     struct{}
	idemOption     string
)

func (v ttlOption) apply(o *callOptions) { o.set |= optTTL; o.ttl = time.Duration(v) }
func (ttlOption) setOption()             {}
func (ttlOption) setManyOption()         {}
func (ttlOption) onceOption()            {}

func (v agentOption) apply(o *callOptions) { o.set |= optAgent; o.agent = string(v) }
func (agentOption) setOption()             {}
func (agentOption) setManyOption()         {}
func (agentOption) deleteOption()          {}
func (agentOption) deleteRunOption()       {}
func (agentOption) createOption()          {}
func (agentOption) checkpointOption()      {}
func (agentOption) finishOption()          {}

func (v versionOption) apply(o *callOptions) {
	o.set |= optVersion
	o.version, o.versionOK = int64(v), true
}
func (versionOption) setOption()    {}
func (versionOption) deleteOption() {}

func (v claimTTLOption) apply(o *callOptions) { o.set |= optClaimTTL; o.claimTTL = time.Duration(v) }
func (claimTTLOption) claimOption()           {}
func (claimTTLOption) onceOption()            {}

func (v fenceOption) apply(o *callOptions) { o.set |= optFence; o.fence, o.fenceSet = int64(v), true }
func (fenceOption) checkpointOption()      {}
func (fenceOption) finishOption()          {}

func (v statusOption) apply(o *callOptions) { o.set |= optStatus; o.status = Status(v) }
func (statusOption) checkpointOption()      {}

func (v limitOption) apply(o *callOptions) { o.set |= optLimit; o.limit = int(v) }
func (limitOption) listOption()            {}

func (v cursorOption) apply(o *callOptions) { o.set |= optCursor; o.cursor = string(v) }
func (cursorOption) listOption()            {}

func (v parentOption) apply(o *callOptions) { o.set |= optParent; o.parent = string(v) }
func (parentOption) createOption()          {}

func (joinOption) apply(o *callOptions) { o.set |= optJoin; o.join = true }
func (joinOption) createOption()        {}

func (v idemOption) apply(o *callOptions) { o.set |= optIdem; o.idem = string(v) }
func (idemOption) createOption()          {}

// callOptions are the options of one call, as its options recorded them.
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
	subject   string
}

// An optionSet is a set of per-call options, one bit each.
type optionSet uint16

// The per-call options.
const (
	optTTL optionSet = 1 << iota
	optAgent
	optVersion
	optClaimTTL
	optFence
	optStatus
	optLimit
	optCursor
	optParent
	optJoin
	optIdem
	optSubject
)

// has reports whether the option o was given.
func (c callOptions) has(o optionSet) bool { return c.set&o != 0 }

// collect applies opts, skipping nil ones, and rounds their TTLs up to
// whole milliseconds: each public method's one line of option handling.
func collect[O option](opts []O) callOptions {
	var o callOptions
	for _, opt := range opts {
		if f := option(opt); f != nil {
			f.apply(&o)
		}
	}
	o.ttl, o.claimTTL = roundTTL(o.ttl), roundTTL(o.claimTTL)
	return o
}
