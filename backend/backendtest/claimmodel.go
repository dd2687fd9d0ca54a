package backendtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/statesidecar/state"
)

// The claim model: agents race to claim one run, heartbeat it, checkpoint it
// with their fence and release it while the clock moves on, and porcupine
// checks that one sequential execution explains every answer: one holder at
// a time, a heartbeat keeps the fence, every new claim's fence is greater
// than every earlier one, another agent takes a claim over only once it has
// expired, and a checkpoint is accepted only from the live holder with the
// live fence.

type claimInput struct {
	op    string // claim, checkpoint, release
	agent string
	ttl   int64 // claim: ms
	fence int64 // checkpoint: the fence the agent passes
}

type claimOutput struct {
	ok        bool
	fence     int64 // claim
	attempt   int64 // claim
	exp       int64 // claim: ms since t0
	renewed   bool  // claim
	reclaimed bool  // claim
	holder    string
	refused   string // claimed, notheld
}

// claimState is the run as the model sees it.
type claimState struct {
	now     int64 // ms since t0
	status  state.Status
	agent   string // the run's agent (cleared by a release)
	holder  string // the claim's holder ("" without a claim)
	exp     int64  // the claim's expiry
	ttl     int64  // the claim's TTL, which a checkpoint extends it by
	fence   int64
	attempt int64
}

func (s claimState) live() bool { return s.holder != "" && s.exp > s.now }

var claimModel = porcupine.Model{
	Init: func() any { return claimState{status: state.StatusCreated} },
	Step: func(st, in, out any) (bool, any) {
		s := st.(claimState)
		if t, ok := in.(tickInput); ok {
			s.now += t.ms
			return true, s
		}
		i, o := in.(claimInput), out.(claimOutput)
		switch i.op {
		case "claim":
			switch {
			case s.live() && s.holder != i.agent: // held: refused, naming the holder
				return o.refused == "claimed" && o.holder == s.holder, s
			case s.live(): // a heartbeat: same fence and attempt, extended
				ok := o.ok && o.renewed && o.fence == s.fence && o.attempt == s.attempt && o.exp == s.now+i.ttl
				s.exp, s.ttl = o.exp, i.ttl
				return ok, s
			default: // created, released or expired: a new claim with a greater fence
				ok := o.ok && !o.renewed && o.fence > s.fence && o.attempt == s.attempt+1 &&
					o.exp == s.now+i.ttl && o.reclaimed == (s.agent != "")
				if s.status == state.StatusCreated {
					s.status = state.StatusClaimed
				}
				s.agent, s.holder, s.fence, s.attempt, s.exp, s.ttl = i.agent, i.agent, o.fence, o.attempt, o.exp, i.ttl
				return ok, s
			}
		case "checkpoint":
			if !s.live() || s.holder != i.agent || i.fence != s.fence {
				return o.refused == "notheld", s
			}
			s.status, s.exp = state.StatusRunning, s.now+s.ttl // every checkpoint is a heartbeat
			return o.ok, s
		case "release":
			if !s.live() || s.holder != i.agent {
				return o.refused == "notheld", s
			}
			if s.status == state.StatusClaimed {
				s.status = state.StatusCreated
			}
			s.agent, s.holder = "", ""
			return o.ok, s
		}
		return false, s
	},
	DescribeOperation: func(in, out any) string {
		if t, ok := in.(tickInput); ok {
			return fmt.Sprintf("tick +%dms", t.ms)
		}
		return fmt.Sprintf("%+v -> %+v", in, out)
	},
}

func claimModelCase(t *testing.T, e storeEnv) {
	const clients, opsEach = 4, 30
	run := mustCreate(t, e, "job", nil)
	r := newTimedRace(e.clk, clients)
	history := r.run([]time.Duration{600 * time.Millisecond, 1300 * time.Millisecond, 300 * time.Millisecond}, func(c int) {
		rng := rand.New(rand.NewPCG(uint64(c), 11))
		agent := fmt.Sprint("agent-", c)
		var fence int64 // the fence of this agent's last claim
		for range opsEach {
			in := claimInput{agent: agent, ttl: 1000 * (1 + rng.Int64N(2))}
			r.call(c, func() (any, any) {
				var out claimOutput
				var err error
				switch n := rng.IntN(10); {
				case n < 5:
					in.op = "claim"
					var cl state.Claim
					cl, err = e.st.ClaimRun(ctx, run.ID, agent, state.WithClaimTTL(time.Duration(in.ttl)*time.Millisecond))
					var ce *state.ClaimError
					if errors.As(err, &ce) && errors.Is(err, state.ErrClaimed) {
						out.refused, out.holder, err = "claimed", ce.Holder, nil
					} else if err == nil {
						out = claimOutput{ok: true, fence: cl.Fence, attempt: cl.Attempt, exp: ms(cl.ExpiresAt),
							renewed: cl.Renewed, reclaimed: cl.Reclaimed}
						fence = cl.Fence
					}
				case n < 8:
					in.op, in.fence = "checkpoint", fence
					_, err = e.st.CheckpointRun(ctx, run.ID, 1, c, state.WithAgent(agent), state.WithFence(fence))
					out.ok = err == nil
				default:
					in.op = "release"
					_, err = e.st.ReleaseRun(ctx, run.ID, agent)
					out.ok = err == nil
				}
				if errors.Is(err, state.ErrNotHeld) {
					out.refused, err = "notheld", nil
				}
				if err != nil && !out.ok {
					t.Errorf("%s: %v", in.op, err)
				}
				return in, out
			})
		}
	})
	checkLinearizable(t, "claim calls", claimModel, history)
}
