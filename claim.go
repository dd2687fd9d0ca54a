package state

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A Claim is the result of a successful ClaimRun.
type Claim struct {
	// Run is the run after the claim.
	Run Run
	// Fence identifies this claim; it is strictly greater than the fence of
	// every earlier claim of the run. Pass it to Checkpoint with WithFence.
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
//   - A done or failed run gives a *ClaimError matching ErrFinished; an
//     unknown run an error matching ErrNotFound.
func (s *Store) ClaimRun(ctx context.Context, id, agentID string, opts ...Option) (Claim, error) {
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
	if c := s.c.claimer; c != nil {
		done, err := s.enter()
		if err != nil {
			return Claim{}, err
		}
		defer done()
		return s.claimNative(ctx, c, id, agent, ttl)
	}
	var out Claim
	err := s.updateRun(ctx, id, nil, func(v *layout.RunValue, cr backend.Record, _ []backend.Record, now time.Time) (*backend.Txn, error) {
		st := Status(v.Status)
		if st.Finished() {
			return nil, &ClaimError{Status: st, Holder: v.AgentID}
		}
		claimOp := backend.Op{Kind: backend.OpPut, Key: layout.Claim(id), Value: claimValue(ttl), Writer: agent, TTL: ttl, Time: now}
		live := backend.Record{Revision: 1, ExpiresAt: now.Add(ttl)}
		if cr.Live() {
			if cr.Writer != agent {
				return nil, &ClaimError{Status: st, Holder: cr.Writer}
			}
			out = Claim{Run: runOf(id, v, live), Fence: v.Fence, Attempt: v.Attempt, ExpiresAt: live.ExpiresAt, Renewed: true}
			return &backend.Txn{
				Then:   []backend.Op{claimOp},
				Events: []backend.Event{{Key: id, Op: "workflow.heartbeat", Value: layout.EventOf(v, nil), Writer: agent}},
			}, nil
		}
		nv := *v
		nv.AgentID = agent
		if st == StatusCreated {
			nv.Status = string(StatusClaimed) // a takeover keeps claimed or running
		}
		nv.Attempt++
		nv.Fence++
		nv.UpdatedAt = layout.Ms(now)
		op := "workflow.claim"
		if v.AgentID != "" { // its holder's claim expired without a release
			op = "workflow.reclaim"
		}
		txn := runWrite(id, v, &nv, now)
		txn.Then = append(txn.Then, claimOp)
		txn.Events = []backend.Event{{Key: id, Op: op, Value: layout.EventOf(&nv, nil), Prev: layout.EventOf(v, nil), Writer: agent}}
		out = Claim{Run: runOf(id, &nv, live), Fence: nv.Fence, Attempt: nv.Attempt, ExpiresAt: live.ExpiresAt,
			Reclaimed: op == "workflow.reclaim"}
		return txn, nil
	})
	if err != nil {
		return Claim{}, err
	}
	return out, nil
}

// claimNative claims through the driver's one-round-trip fast path.
func (s *Store) claimNative(ctx context.Context, c backend.Claimer, id, agent string, ttl time.Duration) (Claim, error) {
	_, now := s.now()
	res, err := c.ClaimRun(ctx, &backend.ClaimQuery{NS: s.ns, Now: now, RunID: id, AgentID: agent, TTL: ttl})
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
	case backend.ClaimFinished:
		return Claim{}, &ClaimError{Status: Status(v.Status), Holder: v.AgentID}
	case backend.ClaimHeld:
		return Claim{}, &ClaimError{Status: Status(v.Status), Holder: res.Claim.Writer}
	case backend.ClaimAcquired, backend.ClaimRenewed:
		return Claim{Run: runOf(id, v, res.Claim), Fence: v.Fence, Attempt: v.Attempt, ExpiresAt: res.Claim.ExpiresAt,
			Renewed: res.Outcome == backend.ClaimRenewed, Reclaimed: res.Reclaimed}, nil
	}
	return Claim{}, fmt.Errorf("driver returned unknown claim outcome %d", res.Outcome)
}

// claimValue encodes a claim's TTL so that checkpoints can extend it.
func claimValue(ttl time.Duration) []byte {
	return []byte(strconv.FormatInt(ttl.Milliseconds(), 10))
}

// claimTTLOf decodes a claim's TTL, falling back to def.
func claimTTLOf(r backend.Record, def time.Duration) time.Duration {
	ms, err := strconv.ParseInt(string(r.Value), 10, 64)
	if err != nil || ms <= 0 {
		return def
	}
	return time.Duration(ms) * time.Millisecond
}

// runWrite returns a Txn that replaces run old by nv, moving it between
// status indexes when its status changed.
func runWrite(id string, old, nv *layout.RunValue, now time.Time) *backend.Txn {
	val, _ := json.Marshal(nv)
	txn := &backend.Txn{Then: []backend.Op{{Kind: backend.OpPut, Key: layout.Run(id), Value: val, Time: now}}}
	if old.Status != nv.Status {
		txn.Then = append(txn.Then,
			backend.Op{Kind: backend.OpDelete, Key: layout.StatusIndex(old.Status) + old.Order},
			backend.Op{Kind: backend.OpPut, Key: layout.StatusIndex(nv.Status) + nv.Order, Time: now})
	}
	return txn
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
	err := s.updateRun(ctx, id, nil, func(v *layout.RunValue, cr backend.Record, _ []backend.Record, now time.Time) (*backend.Txn, error) {
		if Status(v.Status).Finished() {
			return nil, &ClaimError{Status: Status(v.Status), Holder: v.AgentID}
		}
		if !cr.Live() || cr.Writer != agent {
			return nil, notHeld(cr, v)
		}
		nv := *v
		nv.AgentID = ""
		if nv.Status == string(StatusClaimed) {
			nv.Status = string(StatusCreated)
		}
		nv.UpdatedAt = layout.Ms(now)
		txn := runWrite(id, v, &nv, now)
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: layout.Claim(id)})
		txn.Events = []backend.Event{{Key: id, Op: "workflow.release", Value: layout.EventOf(&nv, nil), Prev: layout.EventOf(v, nil), Writer: agent}}
		out = runOf(id, &nv, backend.Record{})
		return txn, nil
	})
	return out, err
}

// notHeld describes who holds a run's claim instead of the caller.
func notHeld(cr backend.Record, v *layout.RunValue) error {
	if !cr.Live() {
		return &NotHeldError{}
	}
	return &NotHeldError{Holder: cr.Writer, Fence: v.Fence}
}
