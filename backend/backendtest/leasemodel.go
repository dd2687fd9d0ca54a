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

// The lease model: holders race to acquire, renew and release leases while
// the clock moves on, and porcupine checks that one sequential execution
// explains every answer: one holder at a time, a holder re-acquiring keeps
// its fence, every new tenure's fence is greater than every earlier one, and
// another holder takes a lease over only once it has expired.

type leaseInput struct {
	op       string // acquire, renew, release
	resource string
	holder   string
	ttl      int64 // ms
}

type leaseOutput struct {
	ok     bool   // acquired, renewed or released
	fence  int64  // acquire, renew: the lease's fence
	exp    int64  // acquire, renew: its expiry; held: the holder's expiry (ms since t0)
	holder string // held: who holds it
}

// leaseState is one resource's lease as the model sees it.
type leaseState struct {
	now    int64  // ms since t0
	holder string // "" after a release; kept after an expiry
	fence  int64
	exp    int64
	last   int64 // the greatest fence handed out
}

func (s leaseState) heldBy(h string) bool { return s.holder == h && s.exp > s.now }

func (s leaseState) live() bool { return s.holder != "" && s.exp > s.now }

var leaseModel = porcupine.Model{
	Partition: partitionWithTicks(func(in any) string { return in.(leaseInput).resource }),
	Init:      func() any { return leaseState{} },
	Step: func(st, in, out any) (bool, any) {
		s := st.(leaseState)
		if t, ok := in.(tickInput); ok {
			s.now += t.ms
			return true, s
		}
		i, o := in.(leaseInput), out.(leaseOutput)
		switch i.op {
		case "acquire":
			switch {
			case !o.ok: // refused: someone else holds it, and the answer names them
				return s.live() && s.holder != i.holder && o.holder == s.holder && o.exp == s.exp, s
			case s.heldBy(i.holder): // the holder again: same fence, extended
				ok := o.fence == s.fence && o.exp == s.now+i.ttl
				s.exp = o.exp
				return ok, s
			case s.live(): // held by another: must not succeed
				return false, s
			default: // free or expired: a new tenure with a greater fence
				ok := o.fence > s.last && o.exp == s.now+i.ttl
				s.holder, s.fence, s.exp, s.last = i.holder, o.fence, o.exp, o.fence
				return ok, s
			}
		case "renew":
			if !s.heldBy(i.holder) {
				return !o.ok, s
			}
			ok := o.ok && o.fence == s.fence && o.exp == s.now+i.ttl
			s.exp = o.exp
			return ok, s
		case "release":
			if !s.heldBy(i.holder) {
				return !o.ok, s
			}
			s.holder = ""
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

// partitionWithTicks partitions a history by key, putting every tick in
// every partition.
func partitionWithTicks(key func(in any) string) func([]porcupine.Operation) [][]porcupine.Operation {
	return func(h []porcupine.Operation) [][]porcupine.Operation {
		var ticks []porcupine.Operation
		by := map[string][]porcupine.Operation{}
		for _, op := range h {
			if _, ok := op.Input.(tickInput); ok {
				ticks = append(ticks, op)
				continue
			}
			k := key(op.Input)
			by[k] = append(by[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range by {
			out = append(out, append(ops, ticks...))
		}
		return out
	}
}

func leaseModelCase(t *testing.T, e storeEnv) {
	const clients, opsEach = 4, 30
	r := newTimedRace(e.clk, clients)
	history := r.run([]time.Duration{700 * time.Millisecond, 1500 * time.Millisecond, 400 * time.Millisecond}, func(c int) {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		holder := fmt.Sprint("holder-", c)
		for range opsEach {
			in := leaseInput{resource: []string{"a", "b"}[rng.IntN(2)], holder: holder, ttl: 1000 * (1 + rng.Int64N(3))}
			ttl := time.Duration(in.ttl) * time.Millisecond
			r.call(c, func() (any, any) {
				var out leaseOutput
				var l state.Lease
				var err error
				switch n := rng.IntN(10); {
				case n < 5:
					in.op = "acquire"
					l, err = e.st.TryAcquireLease(ctx, in.resource, holder, ttl)
					var he *state.HeldError
					if errors.As(err, &he) {
						out.holder, out.exp, err = he.Holder, ms(he.ExpiresAt), nil
					}
				case n < 8:
					in.op = "renew"
					l, err = e.st.RenewLease(ctx, in.resource, holder, ttl)
					if errors.Is(err, state.ErrNotHeld) {
						err = nil
					}
				default:
					in.op = "release"
					out.ok, err = e.st.ReleaseLease(ctx, in.resource, holder)
				}
				switch {
				case err != nil:
					t.Errorf("%s: %v", in.op, err)
				case l.Fence != 0:
					out.ok, out.fence, out.exp = true, l.Fence, ms(l.ExpiresAt)
				}
				return in, out
			})
		}
	})
	checkLinearizable(t, "lease calls", leaseModel, history)
}
