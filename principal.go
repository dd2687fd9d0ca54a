package state

import (
	"context"
	"strings"

	"github.com/statesidecar/state/backend"
)

type principalKey struct{}

// WithPrincipal returns a copy of ctx whose writes record p, the
// authenticated identity behind them (an OAuth subject, a token's name), in
// every history entry they append: Event.Principal, kept apart from the
// AgentID the caller claims. An authenticating server such as the sidecar
// sets it per request; "" records none.
//
// Claims and lease calls made with a principal record it too, through a
// backend's native path as through the portable one (a backend that cannot
// record it natively hands the call to the portable path). A key-value
// entry written with one records it too.
func WithPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put in ctx, if any.
func PrincipalFrom(ctx context.Context) (string, bool) {
	p, ok := ctx.Value(principalKey{}).(string)
	return p, ok && p != ""
}

// writerSep separates, in a stored event's Writer, the agent id from the
// principal. Every backend stores Writer as a string, so the principal needs
// no change of any backend's schema.
const writerSep = "\x1f"

// eventWriter is the Writer a native claim or lease call by agent under
// ctx must give its history event (backend.ClaimQuery.Writer,
// backend.LeaseQuery.Writer): "" when that is agent itself, else what the
// portable path stores, writerOf(agent, the principal), so that an agent
// id holding writerSep is never read back as a principal.
func eventWriter(ctx context.Context, agent string) string {
	p, _ := PrincipalFrom(ctx)
	if w := writerOf(agent, p); w != agent {
		return w
	}
	return ""
}

// writerOf is the stored Writer of an event by agent on behalf of
// principal: agent alone when there is no principal and agent holds no
// writerSep, else agent, writerSep and the principal (with any writerSep in
// it replaced), so that splitting at the last writerSep gives both back and
// no agent id can pass for a principal.
func writerOf(agent, principal string) string {
	if principal == "" && !strings.Contains(agent, writerSep) {
		return agent
	}
	return agent + writerSep + strings.ReplaceAll(principal, writerSep, "?")
}

// splitWriter is the inverse of writerOf.
func splitWriter(w string) (agent, principal string) {
	if i := strings.LastIndex(w, writerSep); i >= 0 {
		return w[:i], w[i+len(writerSep):]
	}
	return w, ""
}

// withPrincipal returns txn, or, when ctx carries a principal or an event's
// writer needs escaping, a copy of it whose events record the principal.
// txn itself is not changed, so a retried txn is not stamped twice.
func withPrincipal(ctx context.Context, txn *backend.Txn) *backend.Txn {
	if txn == nil || len(txn.Events) == 0 {
		return txn
	}
	p, _ := PrincipalFrom(ctx)
	if p == "" && !eventsNeedEscape(txn.Events) {
		return txn
	}
	c := *txn
	c.Events = make([]backend.Event, len(txn.Events))
	for i, e := range txn.Events {
		e.Writer = writerOf(e.Writer, p)
		c.Events[i] = e
	}
	// A Set's event has its Op's writer (backend.IntentSet), which drivers'
	// fast paths rely on: the entry records the principal too (entryOf
	// reads the agent id alone back).
	if c.Intent == backend.IntentSet && len(c.Then) == 1 {
		c.Then = []backend.Op{c.Then[0]}
		c.Then[0].Writer = c.Events[0].Writer
	}
	return &c
}

func eventsNeedEscape(evs []backend.Event) bool {
	for i := range evs {
		if strings.Contains(evs[i].Writer, writerSep) {
			return true
		}
	}
	return false
}
