package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcptasks"
)

// The long-poll tools, state_wait and workflow_wait, wait for a change
// instead of answering at once; each call waits at most its
// timeout_seconds. They need no session: each call stands alone, so they
// work over stateless HTTP behind any load balancer. Called as a task
// (package mcptasks; the sidecar enables it), a call without
// timeout_seconds waits as long as its task lives.
const (
	// MaxWaitTimeout is the longest timeout_seconds a long-poll accepts.
	MaxWaitTimeout = 60 * time.Second
	// DefaultWaitTimeout is the timeout of a long-poll that gives none.
	DefaultWaitTimeout = 30 * time.Second
)

// LongPollTimeout returns how long a call of the tool named tool (without
// prefix) with the given arguments may wait before it answers: the call's
// timeout_seconds, or its default, for state_wait and workflow_wait; false
// for the other tools, which answer at once. A host that bounds every call
// with a deadline should give these calls that much more time (the sidecar
// does); a long-poll answers before its context's deadline anyway, with
// changed (reached) false, so a shorter deadline cuts the wait, not the
// answer. Arguments it cannot read give the default: the call itself will
// reject them.
func LongPollTimeout(tool string, arguments any) (time.Duration, bool) {
	if tool != "state_wait" && tool != "workflow_wait" {
		return 0, false
	}
	d := DefaultWaitTimeout
	if m, ok := arguments.(map[string]any); ok {
		if f, ok := m["timeout_seconds"].(float64); ok && f > 0 {
			d = min(time.Duration(f*float64(time.Second)), MaxWaitTimeout)
		}
	}
	return d, true
}

// The results of the long-polls.
type (
	stateWaitResult struct {
		Changed   bool            `json:"changed" desc:"false when timeout_seconds passed first"`
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
		Found     bool            `json:"found"`
		Version   *int64          `json:"version" desc:"the entry's version: pass it as after_version to wait for the next change"`
		AgentID   *string         `json:"agent_id"`
		UpdatedAt *stamp          `json:"updated_at"`
		ExpiresAt *stamp          `json:"expires_at"`
	}
	workflowWaitResult struct {
		Reached        bool    `json:"reached" desc:"true when the run is in one of the statuses waited for; false when timeout_seconds passed first"`
		RunID          string  `json:"run_id"`
		Status         string  `json:"status"`
		LastStep       int64   `json:"last_step"`
		AgentID        *string `json:"agent_id"`
		CreatedAt      stamp   `json:"created_at"`
		UpdatedAt      stamp   `json:"updated_at"`
		Attempt        int64   `json:"attempt"`
		Fence          *int64  `json:"fence"`
		ClaimExpiresAt *stamp  `json:"claim_expires_at"`
	}
)

// waitContext bounds a long-poll by its timeout, and ends it a little
// before ctx's own deadline, so that the call still answers (changed
// false) rather than failing at that deadline. A call that runs as a task
// (mcptasks) and gives no timeout_seconds waits as long as its task lives,
// less a tenth (at least a second), so that the task's result can be read
// before the task expires.
func waitContext(ctx context.Context, a args) (context.Context, context.CancelFunc) {
	timeout := DefaultWaitTimeout
	margin := func(left time.Duration) time.Duration { return min(time.Second, left/10) }
	if a.has("timeout_seconds") {
		timeout = a.dur("timeout_seconds")
	} else if ex, ok := mcptasks.FromContext(ctx); ok {
		timeout = time.Until(ex.ExpiresAt)
		margin = func(left time.Duration) time.Duration { return max(time.Second, left/10) }
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		timeout = min(timeout, max(left-margin(left), 0))
	}
	return context.WithTimeout(ctx, timeout)
}

// timedOut reports whether a wait ended by its own timeout while the call
// itself may still answer.
func timedOut(ctx context.Context, err error) bool {
	return errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
}

func stateWait(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	key := a.str("key")
	wctx, cancel := waitContext(ctx, a)
	defer cancel()
	e, err := st.WaitKey(wctx, key, a.int("after_version"))
	changed := true
	if timedOut(ctx, err) {
		changed = false
		e, err = st.Get(ctx, key)
		if errors.Is(err, state.ErrNotFound) {
			e, err = state.Entry{Key: key}, nil
		}
	}
	if err != nil {
		return nil, err
	}
	r := stateWaitResult{Changed: changed, Key: key, Value: e.Value}
	if e.Found() {
		r.Found, r.Version, r.AgentID = true, &e.Version, optStr(e.AgentID)
		r.UpdatedAt, r.ExpiresAt = optStamp(e.UpdatedAt), optStamp(e.ExpiresAt)
	}
	return r, nil
}

func workflowWait(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	id := a.str("run_id")
	var until []state.Status
	for _, s := range a.strs("until") {
		until = append(until, state.Status(s))
	}
	wctx, cancel := waitContext(ctx, a)
	defer cancel()
	r, err := st.WaitRun(wctx, id, until...)
	reached := true
	if timedOut(ctx, err) {
		reached = false
		r, err = st.GetRun(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return workflowWaitResult{Reached: reached, RunID: r.ID, Status: string(r.Status), LastStep: r.LastStep,
		AgentID: optStr(r.AgentID), CreatedAt: stamp(r.CreatedAt), UpdatedAt: stamp(r.UpdatedAt), Attempt: r.Attempt,
		Fence: optInt(r.Fence), ClaimExpiresAt: optStamp(r.ClaimExpiresAt)}, nil
}
