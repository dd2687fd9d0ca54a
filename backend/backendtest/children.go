package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

func mustChild(t *testing.T, e storeEnv, parent string, opts ...state.CreateOption) state.Run {
	t.Helper()
	r, err := e.st.CreateRun(ctx, "child", nil, append([]state.CreateOption{state.WithParent(parent)}, opts...)...)
	if err != nil {
		t.Fatalf("CreateRun(WithParent(%s)): %v", parent, err)
	}
	return r
}

// childCounts returns a parent's Run.Children.
func childCounts(t *testing.T, e storeEnv, id string) map[state.Status]int64 {
	t.Helper()
	r, err := e.st.GetRun(ctx, id)
	if err != nil {
		t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r.Children
}

// counts builds a full Run.Children map from the non-zero counts.
func counts(nonZero map[state.Status]int64) map[state.Status]int64 {
	m := map[state.Status]int64{}
	for _, st := range state.Statuses {
		m[st] = nonZero[st]
	}
	return m
}

// opsOf returns the history ops of key, oldest first.
func opsOf(t *testing.T, e storeEnv, key string) []string {
	t.Helper()
	evs, err := e.st.History(ctx, state.HistoryQuery{Key: key, Limit: 100})
	if err != nil {
		t.Fatalf("History(%s): %v", key, err)
	}
	var ops []string
	for i := len(evs) - 1; i >= 0; i-- {
		ops = append(ops, evs[i].Op)
	}
	return ops
}

// otherProcess returns a second store over e's driver and namespace, as
// another process would open: it shares no memory with e.st (such as the
// parents of children it created). Closing it leaves the driver open.
func otherProcess(t *testing.T, e storeEnv) *state.Store {
	t.Helper()
	d := e.st.Driver()
	shared := backend.Driver(unclosed{d})
	if u, ok := d.(backend.Updater); ok {
		shared = unclosedUpdater{unclosed{d}, u}
	}
	st, err := state.New(shared, &state.Options{Clock: yieldingClock{e.clk}, SweepInterval: -1, Namespace: e.st.NamespaceName()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// unclosed is a driver whose Close leaves it open.
type unclosed struct{ backend.Driver }

func (unclosed) Close() error { return nil }

type unclosedUpdater struct {
	unclosed
	backend.Updater
}

func childrenCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"ChildRunsAreLinkedListedAndCounted", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			p := mustCreate(t, e, "parent", nil)
			other := mustCreate(t, e, "other", nil)
			is.Equal(childCounts(t, e, p.ID), nil) // a run without children has no counts
			var kids []state.Run
			for range 4 {
				kids = append(kids, mustChild(t, e, p.ID))
			}
			mustChild(t, e, other.ID)
			is.Equal(kids[0].ParentID, p.ID)
			is.Equal(kids[0].Status, state.StatusCreated) // a child of a plain parent is claimable at once
			is.True(kids[0].Claimable)
			page, err := e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: p.ID})
			is.NoErr(err)
			is.Equal(len(page.Runs), 4) // discovery filters by parent
			c := mustClaim(t, e, kids[0].ID, "A")
			mustClaim(t, e, kids[1].ID, "B")
			_, err = e.st.CheckpointRun(ctx, kids[1].ID, 1, "x")
			is.NoErr(err)
			_, err = e.st.CompleteRun(ctx, kids[2].ID)
			is.NoErr(err)
			_, err = e.st.FailRun(ctx, kids[3].ID)
			is.NoErr(err)
			is.Equal(childCounts(t, e, p.ID), counts(map[state.Status]int64{"claimed": 1, "running": 1, "done": 1, "failed": 1}))
			page, err = e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: p.ID, Claimable: true})
			is.NoErr(err)
			is.Equal(len(page.Runs), 0) // no child is claimable: two are held, two finished
			_, err = e.st.ReleaseRun(ctx, kids[0].ID, "A")
			is.NoErr(err)
			is.Equal(childCounts(t, e, p.ID), counts(map[state.Status]int64{"created": 1, "running": 1, "done": 1, "failed": 1}))
			page, err = e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: p.ID, Status: state.StatusDone})
			is.NoErr(err)
			is.Equal(runIDs(page.Runs), []string{kids[2].ID})
			_ = c
			ops := opsOf(t, e, p.ID)
			is.Equal(ops, []string{"workflow.create", "workflow.link", "workflow.link", "workflow.link", "workflow.link"}) // the parent's history records every child linked
			evs, err := e.st.History(ctx, state.HistoryQuery{Key: kids[0].ID, Limit: 100})
			is.NoErr(err)
			is.True(len(evs) > 0 && evs[len(evs)-1].Op == "workflow.create")
			var created struct {
				Parent string `json:"parent_run_id"`
			}
			is.NoErr(json.Unmarshal(evs[len(evs)-1].Value, &created))
			is.Equal(created.Parent, p.ID) // the child's creation names its parent
		}},
		{"ChildCountsOfAParentWithAnyID", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			for _, id := range []string{`p/a`, `p`, `ä "q"\&<x>%2F`} {
				_, _, err := e.st.ImportRun(ctx, state.ImportedRun{ID: id, Name: "parent", Status: state.StatusCreated})
				is.NoErr(err)
			}
			k := mustChild(t, e, `ä "q"\&<x>%2F`)
			mustClaim(t, e, k.ID, "A") // a native claim finds the parent's counters too
			mustChild(t, e, "p/a")
			is.Equal(childCounts(t, e, `ä "q"\&<x>%2F`), counts(map[state.Status]int64{"claimed": 1}))
			is.Equal(childCounts(t, e, "p"), nil) // one parent's id being a prefix of another's mixes nothing
			page, err := e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: "p"})
			is.NoErr(err)
			is.Equal(len(page.Runs), 0)
		}},
		{"BadPatternInputIsRefusedNamingTheField", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			field := func(err error) string {
				var fe *state.FieldError
				if !errors.As(err, &fe) {
					t.Fatalf("error %v is not a *FieldError", err)
				}
				return fe.Field
			}
			_, err := e.st.CreateRun(ctx, "job", nil, state.WithParent(""))
			is.Equal(field(err), "parent_run_id")
			_, err = e.st.CreateRun(ctx, "job", nil, state.WithIdempotencyKey("bad\x00key"))
			is.Equal(field(err), "idempotency_key")
			_, err = e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: "bad\x00id"})
			is.Equal(field(err), "parent_run_id")
			_, err = e.st.Once(ctx, "", func(context.Context) (any, error) { return 1, nil })
			is.Equal(field(err), "key")
			_, err = e.st.Once(ctx, "k", nil)
			is.Equal(field(err), "fn")
			_, err = e.st.Once(ctx, "k", func(context.Context) (any, error) { return func() {}, nil })
			is.Equal(field(err), "value") // a result that is not JSON records nothing
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(0))
			is.Equal(h.Events, int64(1)) // only the once.start of the effect whose result failed
			r, err := e.st.Once(ctx, "k", func(context.Context) (any, error) { return 2, nil })
			is.NoErr(err)
			is.True(r.Ran) // and its lease was given back at once
		}},
		{"ChildOfAnUnknownOrFinishedParentIsRefused", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.CreateRun(ctx, "child", nil, state.WithParent("wf-000000000000"))
			is.True(errors.Is(err, state.ErrParentNotFound)) // an unknown parent is refused
			p := mustCreate(t, e, "parent", nil)
			_, err = e.st.CompleteRun(ctx, p.ID)
			is.NoErr(err)
			_, err = e.st.CreateRun(ctx, "child", nil, state.WithParent(p.ID))
			is.True(errors.Is(err, state.ErrParentFinished)) // so is a finished one
			page, err := e.st.DiscoverRuns(ctx, state.RunQuery{ParentID: p.ID})
			is.NoErr(err)
			is.Equal(len(page.Runs), 0) // and nothing was created
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(1))
		}},
		{"JoinParentWaitsForEveryChild", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			p, err := e.st.CreateRun(ctx, "aggregate", nil, state.WithJoin())
			is.NoErr(err)
			is.Equal(p.Status, state.StatusWaiting) // a join parent waits
			is.True(!p.Claimable && p.Join)
			_, err = e.st.ClaimRun(ctx, p.ID, "agg")
			is.True(errors.Is(err, state.ErrWaiting)) // a join parent without children is not claimable
			a, b := mustChild(t, e, p.ID), mustChild(t, e, p.ID)
			_, err = e.st.ClaimRun(ctx, p.ID, "agg")
			var ce *state.ClaimError
			is.True(errors.As(err, &ce) && ce.Status == state.StatusWaiting) // the reason names the status
			_, err = e.st.CheckpointRun(ctx, p.ID, 1, "x")
			is.True(errors.Is(err, state.ErrWaiting)) // nor can it be checkpointed
			mustClaim(t, e, a.ID, "w1")
			_, err = e.st.CompleteRun(ctx, a.ID, state.WithAgent("w1"))
			is.NoErr(err)
			got, err := e.st.GetRun(ctx, p.ID)
			is.NoErr(err)
			is.Equal(got.Status, state.StatusWaiting)      // one child is still open
			_, err = otherProcess(t, e).FailRun(ctx, b.ID) // a worker elsewhere
			is.NoErr(err)
			got, err = e.st.GetRun(ctx, p.ID)
			is.NoErr(err)
			is.Equal(got.Status, state.StatusCreated) // the last child finishing released the join
			is.True(got.Claimable)
			is.Equal(got.Children, counts(map[state.Status]int64{"done": 1, "failed": 1}))
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.RunsByStatus[state.StatusWaiting], int64(0))
			is.Equal(h.RunsByStatus[state.StatusCreated], int64(1))

			// A child created after the release, before any aggregator claimed
			// the parent, sends it back to waiting.
			c := mustChild(t, e, p.ID)
			got, _ = e.st.GetRun(ctx, p.ID)
			is.Equal(got.Status, state.StatusWaiting)
			_, err = e.st.CompleteRun(ctx, c.ID)
			is.NoErr(err)
			claim := mustClaim(t, e, p.ID, "agg")
			is.Equal(claim.Attempt, int64(1)) // claimed like a fresh run
			_, err = e.st.CreateRun(ctx, "late", nil, state.WithParent(p.ID))
			is.True(errors.Is(err, state.ErrParentFinished)) // a claimed join parent takes no more children
			is.Equal(opsOf(t, e, p.ID), []string{"workflow.create", "workflow.link", "workflow.link", "workflow.join",
				"workflow.link", "workflow.rejoin", "workflow.join", "workflow.claim"})
		}},
		{"RacingChildrenReleaseTheJoinExactlyOnce", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			const n = 16
			p, err := e.st.CreateRun(ctx, "aggregate", nil, state.WithJoin())
			is.NoErr(err)
			kids := make([]state.Run, n)
			claims := make([]state.Claim, n)
			for i := range kids {
				kids[i] = mustChild(t, e, p.ID)
				claims[i] = mustClaim(t, e, kids[i].ID, fmt.Sprintf("w%d", i))
			}
			// Half the workers run in another process, which has to learn
			// each child's parent from the child.
			other := otherProcess(t, e)
			var rc race
			rc.run(n, func(i int) {
				call := rc.now()
				var err error
				st := e.st
				if i%4 >= 2 {
					st = other
				}
				if i%2 == 0 {
					_, err = st.CompleteRun(ctx, kids[i].ID, state.WithFence(claims[i].Fence))
				} else {
					_, err = st.CheckpointRun(ctx, kids[i].ID, 1, "out", state.WithFence(claims[i].Fence), state.WithStatus(state.StatusFailed))
				}
				rc.record(i, call)
				if err != nil {
					t.Errorf("finish child %d: %v", i, err)
				}
			})
			checkOverlap(t, "children finishing", rc.spans)
			got, err := e.st.GetRun(ctx, p.ID)
			is.NoErr(err)
			is.Equal(got.Children, counts(map[state.Status]int64{"done": n / 2, "failed": n / 2})) // counts stay exact under racing children
			is.Equal(got.Status, state.StatusCreated)                                              // the join released
			joins := 0
			for _, op := range opsOf(t, e, p.ID) {
				if op == "workflow.join" {
					joins++
				}
			}
			is.Equal(joins, 1) // exactly once

			var wins atomic.Int64
			var ac race
			ac.run(8, func(i int) {
				call := ac.now()
				_, err := e.st.ClaimRun(ctx, p.ID, fmt.Sprintf("agg-%d", i))
				ac.record(i, call)
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, state.ErrClaimed):
					t.Errorf("claim: %v", err)
				}
			})
			checkOverlap(t, "aggregators", ac.spans)
			is.Equal(wins.Load(), int64(1)) // exactly one aggregator claims the released parent
		}},
		{"IdempotencyKeyReplaysTheRunItMade", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			first, err := e.st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7"))
			is.NoErr(err)
			is.True(!first.Replayed)
			again, err := e.st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7"))
			is.NoErr(err)
			is.Equal(again.ID, first.ID) // a retry returns the same run
			is.True(again.Replayed)      // and says it was a replay
			is.Equal(opsOf(t, e, first.ID), []string{"workflow.create", "workflow.replay"})
			other, err := e.st.Namespace(e.st.NamespaceName() + "-b")
			is.NoErr(err)
			t.Cleanup(func() { _, _ = other.Reset(ctx) })
			elsewhere, err := other.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7"))
			is.NoErr(err)
			is.True(!elsewhere.Replayed && elsewhere.ID != first.ID) // keys are per namespace
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(1))
			e.clk.Advance(state.DefaultIdempotencyWindow)
			later, err := e.st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7"))
			is.NoErr(err)
			is.True(!later.Replayed && later.ID != first.ID) // after the window the key is forgotten
			_, err = e.st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey(""))
			is.True(errors.Is(err, state.ErrInvalid)) // an empty key is refused
			_, err = e.st.Reset(ctx)
			is.NoErr(err)
			fresh, err := e.st.CreateRun(ctx, "refund", nil, state.WithIdempotencyKey("order-7"))
			is.NoErr(err)
			is.True(!fresh.Replayed) // reset clears idempotency keys
		}},
		{"RacingIdempotentCreatesMakeOneRun", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			p := mustCreate(t, e, "parent", nil)
			const n = 16
			ids := make([]string, n)
			var replays atomic.Int64
			var rc race
			rc.run(n, func(i int) {
				call := rc.now()
				r, err := e.st.CreateRun(ctx, "job", nil, state.WithIdempotencyKey("k"), state.WithParent(p.ID))
				rc.record(i, call)
				if err != nil {
					t.Errorf("create: %v", err)
					return
				}
				ids[i] = r.ID
				if r.Replayed {
					replays.Add(1)
				}
			})
			checkOverlap(t, "idempotent creates", rc.spans)
			for _, id := range ids {
				is.Equal(id, ids[0]) // every racing create returns the same run
			}
			is.Equal(replays.Load(), int64(n-1)) // all but one were replays
			is.Equal(childCounts(t, e, p.ID), counts(map[state.Status]int64{"created": 1}))
		}},
		{"OnceRunsAnEffectAndRecordsItsResultOnce", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			var runs atomic.Int64
			effect := func(context.Context) (any, error) { return map[string]int64{"paid": runs.Add(1)}, nil }
			r, err := e.st.Once(ctx, "refund-7", effect)
			is.NoErr(err)
			is.True(r.Ran)
			is.Equal(string(r.Value), `{"paid":1}`)
			r, err = e.st.Once(ctx, "refund-7", effect)
			is.NoErr(err)
			is.True(!r.Ran) // a later caller gets the recorded result
			is.Equal(string(r.Value), `{"paid":1}`)
			is.Equal(runs.Load(), int64(1))

			boom := errors.New("provider down")
			_, err = e.st.Once(ctx, "refund-8", func(context.Context) (any, error) { return nil, boom })
			is.True(errors.Is(err, boom)) // a failing effect records nothing
			r, err = e.st.Once(ctx, "refund-8", effect)
			is.NoErr(err)
			is.True(r.Ran) // and the next caller runs it at once
			is.Equal(opsOf(t, e, "refund-7"), []string{"once.start", "once.done"})

			e.clk.Advance(state.DefaultIdempotencyWindow)
			r, err = e.st.Once(ctx, "refund-7", effect)
			is.NoErr(err)
			is.True(r.Ran) // the result is kept for the window only
		}},
		{"OnceRunsAgainWhenTheFirstCallerDies", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			started, release := make(chan struct{}), make(chan struct{})
			type result struct {
				r   state.OnceResult
				err error
			}
			first := make(chan result, 1)
			go func() {
				r, err := e.st.Once(ctx, "mail", func(context.Context) (any, error) {
					close(started)
					<-release // stuck mid-effect, as a caller that died
					return "first", nil
				}, state.WithClaimTTL(time.Minute))
				first <- result{r, err}
			}()
			<-started
			e.clk.Advance(time.Minute) // its lease expires
			r, err := e.st.Once(ctx, "mail", func(context.Context) (any, error) { return "second", nil })
			is.NoErr(err)
			is.True(r.Ran) // a later caller runs the effect again: at-least-once execution
			is.Equal(string(r.Value), `"second"`)
			close(release)
			f := <-first
			is.True(errors.Is(f.err, state.ErrNotHeld)) // the first caller cannot record: exactly-once recording
			is.Equal(string(f.r.Value), `"first"`)
			r, err = e.st.Once(ctx, "mail", func(context.Context) (any, error) { return "third", nil })
			is.NoErr(err)
			is.Equal(string(r.Value), `"second"`) // the one recorded result
		}},
		{"PatternRecordsExpireSweepAndReset", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			p, err := e.st.CreateRun(ctx, "aggregate", nil, state.WithJoin(), state.WithIdempotencyKey("k"))
			is.NoErr(err)
			mustChild(t, e, p.ID)
			_, err = e.st.Once(ctx, "effect", func(context.Context) (any, error) { return 1, nil })
			is.NoErr(err)
			prefixes := []string{"d/", "e/", "n/c/", "i/p/", "i/op/"}
			stored := func() []int64 {
				c, err := e.st.Driver().Count(ctx, &backend.CountQuery{NS: e.st.NamespaceName(), Prefixes: prefixes, Now: e.clk.Now()})
				is.NoErr(err)
				return c.Prefixes
			}
			is.Equal(stored(), []int64{1, 1, 1, 1, 1}) // a key, an effect, one counter (unstarted), the child in both indexes
			h, err := e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.RunsByStatus[state.StatusWaiting], int64(1)) // health counts the waiting parent
			is.Equal(h.Runs, int64(2))
			e.clk.Advance(state.DefaultIdempotencyWindow + 2*state.DefaultSweepGrace)
			_, err = e.st.Sweep(ctx)
			is.NoErr(err)
			left := stored()
			is.Equal(left[:2], []int64{0, 0}) // idempotency keys and effects expire after the window
			n, err := e.st.Reset(ctx)
			is.NoErr(err)
			is.True(n > 0)
			is.Equal(stored(), []int64{0, 0, 0, 0, 0}) // reset clears what children, keys and effects left
			h, err = e.st.Health(ctx)
			is.NoErr(err)
			is.Equal(h.Runs, int64(0))
			is.Equal(h.Events, int64(0))
		}},
		{"RacingOnceCallersShareOneResult", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			var runs atomic.Int64
			const n = 16
			vals := make([]string, n)
			var rc race
			rc.run(n, func(i int) {
				call := rc.now()
				r, err := e.st.Once(ctx, "effect", func(context.Context) (any, error) { return fmt.Sprintf("by %d", i), nil })
				rc.record(i, call)
				if err != nil {
					t.Errorf("once: %v", err)
					return
				}
				if r.Ran {
					runs.Add(1)
				}
				vals[i] = string(r.Value)
			})
			checkOverlap(t, "once callers", rc.spans)
			is.Equal(runs.Load(), int64(1)) // one caller ran the effect
			for _, v := range vals {
				is.Equal(v, vals[0]) // and every caller got its result
			}
		}},
	}
}
