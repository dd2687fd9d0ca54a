package state

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A Claim is the result of a successful ClaimRun.
type Claim struct {
	// Run is the run after the claim.
	Run Run
	// Fence identifies this claim; it is strictly greater than the fence of
	// every earlier claim of the run. Pass it to CheckpointRun with WithFence.
	Fence int64
	// Attempt counts the run's claims, this one included.
	Attempt int64
	// ExpiresAt is when the claim expires unless renewed by a heartbeat
	// (claiming again, or any checkpoint).
	ExpiresAt time.Time
	// Renewed is set when the caller already held the claim: the call was a
	// heartbeat that extended it.
	Renewed bool
	// Reclaimed is set when the run had been claimed by an agent whose claim
	// expired: this is crash recovery, and the run's last step and outputs
	// are still there to resume from.
	Reclaimed bool
}

// ClaimRun atomically claims run id for agentID; of any number of racing
// claimers exactly one wins. It honours WithClaimTTL (default
// Options.ClaimTTL).
//
//   - A created run becomes claimed, with attempt 1 and a fence token.
//   - The holder claiming again while its claim is live extends the claim
//     (a heartbeat); the fence stays the same.
//   - Another agent while the claim is live gets a *ClaimError matching
//     ErrClaimed, naming the holder.
//   - A claimed or running run whose claim expired can be claimed by anyone:
//     attempt + 1, a greater fence, last step and outputs kept.
//   - A done or failed run gives a *ClaimError matching ErrFinished; a
//     join parent waiting for its children (StatusWaiting) one matching
//     ErrWaiting; an unknown run an error matching ErrNotFound.
func (s *Store) ClaimRun(ctx context.Context, id, agentID string, opts ...ClaimOption) (Claim, error) {
	c, err := s.claimRun(ctx, id, agentID, collect(opts))
	return c, wrap("workflow.claim", id, err)
}

func (s *Store) claimRun(ctx context.Context, id, agent string, o callOptions) (Claim, error) {
	if err := s.checkRunID(id); err != nil {
		return Claim{}, err
	}
	if err := checkKey("agent_id", agent, s.c.opts.Limits.MaxIDBytes); err != nil {
		return Claim{}, err
	}
	ttl := s.c.opts.ClaimTTL
	if o.claimTTL != 0 {
		if err := checkTTL("claim_ttl", o.claimTTL); err != nil {
			return Claim{}, err
		}
		ttl = o.claimTTL
	}
	if s.c.drv.claimer != nil {
		c, err := s.claimNative(ctx, id, agent, ttl)
		if !errors.Is(err, backend.ErrSkip) {
			return c, err
		}
		// The driver cannot claim this run natively: the portable claim
		// rewrites it, in a form the native claim reads next time.
	}
	var out Claim
	parent := ""
	err := s.updateRun(ctx, id, nil, func(v *layout.RunValue, _ []backend.Record, now time.Time) (*backend.Txn, error) {
		st := Status(v.Status)
		if st.Finished() || st == StatusWaiting {
			return nil, &ClaimError{Status: st, Holder: v.AgentID}
		}
		nowMs := layout.Ms(now)
		nv := *v
		nv.ClaimTTL = ttlMillis(ttl)
		nv.ClaimExpiresAt = nowMs + nv.ClaimTTL
		if v.ClaimLive(nowMs) {
			if v.AgentID != agent {
				return nil, &ClaimError{Status: st, Holder: v.AgentID}
			}
			out = Claim{Run: runOf(id, &nv, nowMs), Fence: v.Fence, Attempt: v.Attempt,
				ExpiresAt: layout.Time(nv.ClaimExpiresAt), Renewed: true}
			txn := runWrite(id, v, &nv, now)
			txn.Events = []backend.Event{{Key: id, Op: "workflow.heartbeat", Value: layout.EventOf(v, nil), Writer: agent}}
			return txn, nil
		}
		nv.AgentID = agent
		if st == StatusCreated {
			nv.Status = layout.Claimed // a takeover keeps claimed or running
		}
		nv.Attempt++
		nv.Fence++
		nv.UpdatedAt = nowMs
		op := "workflow.claim"
		if v.AgentID != "" { // its holder's claim expired without a release
			op = "workflow.reclaim"
		}
		txn := runWrite(id, v, &nv, now)
		txn.Events = []backend.Event{{Key: id, Op: op, Value: layout.EventOf(&nv, nil), Prev: layout.EventOf(v, nil), Writer: agent}}
		parent = v.Parent
		out = Claim{Run: runOf(id, &nv, nowMs), Fence: nv.Fence, Attempt: nv.Attempt,
			ExpiresAt: layout.Time(nv.ClaimExpiresAt), Reclaimed: op == "workflow.reclaim"}
		return txn, nil
	})
	if err != nil {
		return Claim{}, err
	}
	s.c.parents.put(s.ns, id, parent)
	return out, nil
}

// claimNative claims through the driver's one-round-trip fast path. It
// returns an error matching backend.ErrSkip when the driver cannot.
func (s *Store) claimNative(ctx context.Context, id, agent string, ttl time.Duration) (Claim, error) {
	done, err := s.enter()
	if err != nil {
		return Claim{}, err
	}
	defer done()
	_, now := s.now()
	ttl = time.Duration(ttlMillis(ttl)) * time.Millisecond // as the portable path rounds it
	res, err := s.c.drv.ClaimRun(ctx, &backend.ClaimQuery{NS: s.ns, Now: now, RunID: id, AgentID: agent, TTL: ttl,
		Writer: eventWriter(ctx, agent)})
	if err != nil {
		return Claim{}, err
	}
	if res.Outcome == backend.ClaimNotFound {
		return Claim{}, ErrNotFound
	}
	v, err := decodeRun(res.Run)
	if err != nil {
		return Claim{}, err
	}
	switch res.Outcome {
	case backend.ClaimFinished, backend.ClaimHeld, backend.ClaimWaiting:
		return Claim{}, &ClaimError{Status: Status(v.Status), Holder: v.AgentID}
	case backend.ClaimAcquired, backend.ClaimRenewed:
		s.c.parents.put(s.ns, id, v.Parent)
		return Claim{Run: runOf(id, v, layout.Ms(res.Now)), Fence: v.Fence, Attempt: v.Attempt,
			ExpiresAt: layout.Time(v.ClaimExpiresAt), Renewed: res.Outcome == backend.ClaimRenewed,
			Reclaimed: res.Reclaimed}, nil
	}
	return Claim{}, fmt.Errorf("driver returned unknown claim outcome %d", res.Outcome)
}

// ttlMillis converts a claim TTL to whole milliseconds, rounding up.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// ReleaseRun gives agentID's live claim on run id back, so that another
// agent may claim it at once: a claimed run returns to created, a running
// run stays running (and claimable), and its agent is cleared. It fails with
// a *NotHeldError when agentID does not hold a live claim.
func (s *Store) ReleaseRun(ctx context.Context, id, agentID string) (Run, error) {
	r, err := s.releaseRun(ctx, id, agentID)
	return r, wrap("workflow.release", id, err)
}

func (s *Store) releaseRun(ctx context.Context, id, agent string) (Run, error) {
	if err := s.checkRunID(id); err != nil {
		return Run{}, err
	}
	if err := checkKey("agent_id", agent, s.c.opts.Limits.MaxIDBytes); err != nil {
		return Run{}, err
	}
	var out Run
	err := s.updateRun(ctx, id, nil, func(v *layout.RunValue, _ []backend.Record, now time.Time) (*backend.Txn, error) {
		if Status(v.Status).Finished() {
			return nil, &ClaimError{Status: Status(v.Status), Holder: v.AgentID}
		}
		nowMs := layout.Ms(now)
		if !v.ClaimLive(nowMs) || v.AgentID != agent {
			return nil, notHeld(v, nowMs)
		}
		nv := *v
		nv.AgentID, nv.ClaimExpiresAt, nv.ClaimTTL = "", 0, 0
		if nv.Status == layout.Claimed {
			nv.Status = layout.Created
		}
		nv.UpdatedAt = nowMs
		txn := runWrite(id, v, &nv, now)
		txn.Events = []backend.Event{{Key: id, Op: "workflow.release", Value: layout.EventOf(&nv, nil), Prev: layout.EventOf(v, nil), Writer: agent}}
		out = runOf(id, &nv, nowMs)
		return txn, nil
	})
	return out, err
}

// notHeld describes who holds a run's claim instead of the caller.
func notHeld(v *layout.RunValue, nowMs int64) error {
	if !v.ClaimLive(nowMs) {
		return &NotHeldError{}
	}
	return &NotHeldError{Holder: v.AgentID, Fence: v.Fence}
}
