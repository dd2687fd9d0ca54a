package state

import (
	"math/bits"
	"strings"
)

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
)

// optionNames names each option as its constructor and as the MCP tools
// spell the argument (the FieldError's field), in bit order.
var optionNames = [...]struct{ fn, field string }{
	{"WithTTL", "ttl"},
	{"WithAgent", "agent_id"},
	{"IfVersion", "if_version"},
	{"WithClaimTTL", "claim_ttl"},
	{"WithFence", "fence"},
	{"WithStatus", "status"},
	{"WithLimit", "limit"},
	{"WithCursor", "cursor"},
	{"WithParent", "parent_run_id"},
	{"WithJoin", "join"},
	{"WithIdempotencyKey", "idempotency_key"},
}

// honours says which options each method honours. An option outside a
// method's set is an error naming it: an option never silently does
// nothing. A method that takes options and is missing here honours none.
var honours = map[string]optionSet{
	"Set":           optTTL | optAgent | optVersion,
	"Delete":        optAgent | optVersion,
	"List":          optLimit | optCursor,
	"SetMany":       optTTL | optAgent,
	"SaveSession":   optTTL | optAgent | optVersion,
	"DeleteSession": optAgent | optVersion,
	"CreateRun":     optAgent | optParent | optJoin | optIdem,
	"ListRuns":      optLimit | optCursor,
	"ClaimRun":      optClaimTTL,
	"Checkpoint":    optAgent | optFence | optStatus,
	"CompleteRun":   optAgent | optFence,
	"FailRun":       optAgent | optFence,
	"Once":          optTTL | optClaimTTL,
}

// has reports whether the option o was given.
func (c callOptions) has(o optionSet) bool { return c.set&o != 0 }

// collect applies opts (skipping nil ones) for method, rounds their TTLs up
// to whole milliseconds, and rejects, with a *FieldError naming the first of
// them, the options method does not honour.
func collect(method string, opts []Option) (callOptions, error) {
	var o callOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	o.ttl, o.claimTTL = roundTTL(o.ttl), roundTTL(o.claimTTL)
	ok := honours[method]
	if extra := o.set &^ ok; extra != 0 {
		n := optionNames[bits.TrailingZeros16(uint16(extra))]
		return o, invalid(n.field, "(%s) is not an option of %s, which honours %s", n.fn, method, ok.names())
	}
	return o, nil
}

// withOptions collects opts for method and, when they are all honoured,
// calls f with them: each public method's one line of option handling.
func withOptions[T any](method string, opts []Option, f func(callOptions) (T, error)) (T, error) {
	o, err := collect(method, opts)
	if err != nil {
		var zero T
		return zero, err
	}
	return f(o)
}

// names lists the options of s by constructor name.
func (s optionSet) names() string {
	if s == 0 {
		return "no options"
	}
	var ns []string
	for i, n := range optionNames {
		if s&(1<<i) != 0 {
			ns = append(ns, n.fn)
		}
	}
	return strings.Join(ns, ", ")
}
