package backendtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/statetest"
)

// The waits are real: a waiter blocks until a write wakes it. So that a
// test proves the wake-up and not a poll, the stores of these cases poll
// once an hour (Options.WaitPollInterval) unless the case is about
// polling, and a write is made only once the waiter is parked
// (Store.Waiting). Deadlines are generous: they only keep a broken
// backend from hanging the suite.

// waitDeadline bounds every wait of the suite.
const waitDeadline = 30 * time.Second

// waitEnv opens a store on a fresh driver that polls every poll.
func waitEnv(t *testing.T, e storeEnv, poll time.Duration) (*state.Store, *statetest.Clock) {
	t.Helper()
	return waitStore(t, e.newDriver(t), poll, newNS())
}

func waitStore(t *testing.T, d backend.Driver, poll time.Duration, ns string) (*state.Store, *statetest.Clock) {
	t.Helper()
	clk := statetest.NewClock()
	st, err := state.New(d, &state.Options{Clock: yieldingClock{clk}, SweepInterval: -1, Namespace: ns, WaitPollInterval: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, clk
}

// twoHandles returns two stores on one new driver and namespace, standing
// for two processes: each learns of the other's writes only through the
// driver (backend.Notifier) or, if the driver does not notify, by polling
// every 10ms.
func twoHandles(t *testing.T, e storeEnv) (*state.Store, *state.Store) {
	t.Helper()
	d := e.newDriver(t)
	poll := 10 * time.Millisecond
	if notifies(d) {
		poll = time.Hour
	}
	ns := newNS()
	a, _ := waitStore(t, d, poll, ns)
	b, _ := waitStore(t, d, poll, ns)
	return a, b
}

// parked waits until n calls wait on st.
func parked(t *testing.T, st *state.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for st.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiters parked, want %d", st.Waiting(), n)
		}
		time.Sleep(time.Millisecond) // polls a condition; no test outcome depends on the duration
	}
}

// notifies reports whether d (or the driver it hides) tells of changes
// made through other handles.
func notifies(d backend.Driver) bool {
	_, ok := d.(backend.Notifier)
	return ok
}

// consecutive reports whether d's event ids are consecutive.
func consecutive(d backend.Driver) bool {
	ch, ok := d.(backend.ConsecutiveHistory)
	return ok && ch.ConsecutiveHistory()
}

// ordered reports whether d's events become visible in id order
// (backend.OrderedHistory, implied by consecutive ids).
func ordered(d backend.Driver) bool {
	o, ok := d.(backend.OrderedHistory)
	return consecutive(d) || ok && o.OrderedHistory()
}

type waitResult[T any] struct {
	v   T
	err error
}

// async runs f in a goroutine and returns its result channel.
func async[T any](f func() (T, error)) <-chan waitResult[T] {
	ch := make(chan waitResult[T], 1)
	go func() {
		v, err := f()
		ch <- waitResult[T]{v, err}
	}()
	return ch
}

func await[T any](t *testing.T, ch <-chan waitResult[T]) (T, error) {
	t.Helper()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(waitDeadline):
		t.Fatal("the waiter was not woken")
		panic("unreachable")
	}
}

func waitCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"WaitKeyWakesOnWrite", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			first, err := st.Set(ctx, "k", 1)
			is.NoErr(err)
			ch := async(func() (state.Entry, error) { return st.WaitKey(ctx, "k", first.Version) })
			parked(t, st, 1)
			second, err := st.Set(ctx, "k", 2)
			is.NoErr(err)
			got, err := await(t, ch)
			is.NoErr(err)
			is.Equal(got.Version, second.Version)
			is.Equal(string(got.Value), "2")
			is.Equal(st.Waiting(), 0)
		}},
		{"WaitKeyReturnsAtOnceWhenNewer", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			first, err := e.st.Set(ctx, "k", 1)
			is.NoErr(err)
			got, err := e.st.WaitKey(ctx, "k", 0) // exists: newer than absent
			is.NoErr(err)
			is.Equal(got.Version, first.Version)
			got, err = e.st.WaitKey(ctx, "gone", 5) // absent while the caller saw version 5: deleted
			is.NoErr(err)
			is.True(!got.Found())
		}},
		{"WaitKeySeesDeleteAndCreate", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			first, err := st.Set(ctx, "k", 1)
			is.NoErr(err)
			ch := async(func() (state.Entry, error) { return st.WaitKey(ctx, "k", first.Version) })
			parked(t, st, 1)
			_, err = st.Delete(ctx, "k")
			is.NoErr(err)
			got, err := await(t, ch)
			is.NoErr(err)
			is.True(!got.Found())
			ch = async(func() (state.Entry, error) { return st.WaitKey(ctx, "k", 0) })
			parked(t, st, 1)
			_, err = st.Set(ctx, "other", 1) // an unrelated write does not end the wait
			is.NoErr(err)
			again, err := st.Set(ctx, "k", 3)
			is.NoErr(err)
			got, err = await(t, ch)
			is.NoErr(err)
			is.Equal(got.Version, again.Version)
		}},
		{"WaitKeyWakesOnExpiry", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, clk := waitEnv(t, e, time.Hour)
			first, err := st.Set(ctx, "k", 1, state.WithTTL(time.Minute))
			is.NoErr(err)
			timers := len(clk.Timers())
			ch := async(func() (state.Entry, error) { return st.WaitKey(ctx, "k", first.Version) })
			parked(t, st, 1)
			tctx, cancel := context.WithTimeout(ctx, waitDeadline)
			defer cancel()
			is.NoErr(clk.WaitTimers(tctx, timers+1)) // the waiter waits for the expiry
			clk.Advance(time.Minute)
			got, err := await(t, ch)
			is.NoErr(err)
			is.True(!got.Found())
		}},
		{"WaitKeyRespectsTheDeadline", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			first, err := e.st.Set(ctx, "k", 1)
			is.NoErr(err)
			dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			_, err = e.st.WaitKey(dctx, "k", first.Version)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("want context.DeadlineExceeded, got %v", err)
			}
			is.Equal(e.st.Waiting(), 0)
		}},
		{"WaitKeyWakesOnOtherHandlesWrite", func(t *testing.T, e storeEnv) {
			// Two stores on one driver stand for two processes: the
			// waiter's store learns of the other's write only through the
			// driver (backend.Notifier) or by polling.
			is := is.New(t)
			waiter, writer := twoHandles(t, e)
			first, err := writer.Set(ctx, "k", 1)
			is.NoErr(err)
			ch := async(func() (state.Entry, error) { return waiter.WaitKey(ctx, "k", first.Version) })
			parked(t, waiter, 1)
			second, err := writer.Set(ctx, "k", 2)
			is.NoErr(err)
			got, err := await(t, ch)
			is.NoErr(err)
			is.Equal(got.Version, second.Version)
		}},
		{"WaitRunUntilStatus", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			r, err := st.CreateRun(ctx, "job", nil)
			is.NoErr(err)
			got, err := st.WaitRun(ctx, r.ID, state.StatusCreated) // already there
			is.NoErr(err)
			is.Equal(got.Status, state.StatusCreated)
			ch := async(func() (state.Run, error) { return st.WaitRun(ctx, r.ID) }) // done or failed
			parked(t, st, 1)
			c, err := st.ClaimRun(ctx, r.ID, "w")
			is.NoErr(err)
			_, err = st.CheckpointRun(ctx, r.ID, 1, "half", state.WithFence(c.Fence))
			is.NoErr(err)
			_, err = st.CheckpointRun(ctx, r.ID, 2, "all", state.WithFence(c.Fence), state.WithStatus(state.StatusDone))
			is.NoErr(err)
			got, err = await(t, ch)
			is.NoErr(err)
			is.Equal(got.Status, state.StatusDone)
			is.Equal(got.LastStep, int64(2))
		}},
		{"WaitRunFuncSeesOtherRuns", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			parent, err := st.CreateRun(ctx, "parent", nil)
			is.NoErr(err)
			child, err := st.CreateRun(ctx, "child", nil)
			is.NoErr(err)
			ch := async(func() (state.Run, error) {
				return st.WaitRunFunc(ctx, parent.ID, func(state.Run) bool {
					c, err := st.GetRun(context.Background(), child.ID) // a test may; a real condition must not
					return err == nil && c.Status == state.StatusClaimed
				})
			})
			parked(t, st, 1)
			_, err = st.ClaimRun(ctx, child.ID, "w")
			is.NoErr(err)
			got, err := await(t, ch)
			is.NoErr(err)
			is.Equal(got.ID, parent.ID)
		}},
		{"WaitRunErrors", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.WaitRun(ctx, "wf-000000000000")
			is.True(errors.Is(err, state.ErrNotFound))
			_, err = e.st.WaitRun(ctx, "wf-000000000000", "finished")
			var fe *state.FieldError
			is.True(errors.As(err, &fe))
			is.Equal(fe.Field, "until")
			_, err = e.st.WaitKey(ctx, "k", -1)
			is.True(errors.As(err, &fe))
			is.Equal(fe.Field, "after_version")
			_, err = e.st.WaitKey(ctx, "", 0)
			is.True(errors.As(err, &fe))
			is.Equal(fe.Field, "key")
		}},
		{"WaitRunEndsOnReset", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			r, err := st.CreateRun(ctx, "job", nil)
			is.NoErr(err)
			ch := async(func() (state.Run, error) { return st.WaitRun(ctx, r.ID) })
			parked(t, st, 1)
			_, err = st.Reset(ctx)
			is.NoErr(err)
			_, err = await(t, ch)
			is.True(errors.Is(err, state.ErrNotFound))
		}},
		{"WatchDeliversInOrderAndResumesWithoutGaps", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			for i := range 3 {
				_, err := st.Set(ctx, fmt.Sprintf("a/%d", i), i)
				is.NoErr(err)
			}
			_, err := st.Set(ctx, "b/0", 0)
			is.NoErr(err)
			var seen []state.Event
			for ev, err := range st.Watch(ctx, state.WatchQuery{Prefix: "a/"}) {
				is.NoErr(err)
				seen = append(seen, ev)
				if len(seen) == 2 {
					break // cut
				}
			}
			is.Equal(seen[0].Key, "a/0")
			is.Equal(seen[1].Key, "a/1")
			_, err = st.Set(ctx, "a/3", 3)
			is.NoErr(err)
			for ev, err := range st.Watch(ctx, state.WatchQuery{Prefix: "a/", After: seen[1].ID}) {
				is.NoErr(err)
				seen = append(seen, ev)
				if len(seen) == 4 {
					break
				}
			}
			is.Equal(seen[2].Key, "a/2")
			is.Equal(seen[3].Key, "a/3")
			for i := 1; i < len(seen); i++ {
				is.True(seen[i].ID > seen[i-1].ID)
			}
		}},
		{"WatchWaitsForNewEvents", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			first, err := st.Set(ctx, "k", 0)
			is.NoErr(err)
			h, err := st.History(ctx, state.HistoryQuery{Limit: 1})
			is.NoErr(err)
			is.Equal(h[0].Revision, first.Version)
			ch := async(func() ([]state.Event, error) {
				var got []state.Event
				for ev, err := range st.Watch(ctx, state.WatchQuery{After: h[0].ID}) {
					if err != nil {
						return got, err
					}
					if got = append(got, ev); len(got) == 3 {
						break
					}
				}
				return got, nil
			})
			parked(t, st, 1)
			_, err = st.SetMany(ctx, []state.Item{{Key: "x", Value: 1}, {Key: "y", Value: 2}})
			is.NoErr(err)
			_, err = st.Delete(ctx, "k")
			is.NoErr(err)
			got, err := await(t, ch)
			is.NoErr(err)
			is.Equal(len(got), 3)
			is.Equal(got[0].Key, "x")
			is.Equal(got[1].Key, "y")
			is.Equal(got[2].Op, "kv.delete")
		}},
		{"WatchOfOtherHandlesWrites", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			watcher, writer := twoHandles(t, e)
			ch := async(func() (state.Event, error) {
				for ev, err := range watcher.Watch(ctx, state.WatchQuery{}) {
					return ev, err
				}
				return state.Event{}, errors.New("no event")
			})
			parked(t, watcher, 1)
			_, err := writer.Set(ctx, "k", 1)
			is.NoErr(err)
			ev, err := await(t, ch)
			is.NoErr(err)
			is.Equal(ev.Key, "k")
		}},
		{"WatchReportsEventsRemovedUnseen", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			if !consecutive(unhide(e.st.Driver())) {
				t.Skip("the driver's event ids are not consecutive: Watch cannot tell")
			}
			st := e.st
			for i := range 3 {
				_, err := st.Set(ctx, fmt.Sprintf("k%d", i), i)
				is.NoErr(err)
			}
			h, err := st.History(ctx, state.HistoryQuery{Limit: 3})
			is.NoErr(err)
			_, err = st.Reset(ctx)
			is.NoErr(err)
			_, err = st.Set(ctx, "after", 1)
			is.NoErr(err)
			for _, err := range st.Watch(ctx, state.WatchQuery{After: h[2].ID}) { // saw the first event only
				if consecutive(st.Driver()) {
					is.True(errors.Is(err, state.ErrHistoryGap))
				}
				break
			}
		}},
		{"WatchIsOrderedUnderRacingWriters", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			if !ordered(unhide(e.st.Driver())) {
				t.Skip("the driver does not promise that events become visible in id order")
			}
			gapless := consecutive(unhide(e.st.Driver()))
			st, _ := waitEnv(t, e, time.Hour)
			const writers, each = 4, 25
			ch := async(func() ([]state.Event, error) {
				var got []state.Event
				for ev, err := range st.Watch(ctx, state.WatchQuery{}) {
					if err != nil {
						return got, err
					}
					if got = append(got, ev); len(got) == writers*each {
						break
					}
				}
				return got, nil
			})
			parked(t, st, 1)
			var r race
			r.run(writers, func(i int) {
				for j := range each {
					call := r.now()
					_, err := st.Set(ctx, fmt.Sprintf("w%d", i), j)
					r.record(i, call)
					if err != nil {
						t.Error(err)
					}
				}
			})
			checkOverlap(t, "writers", r.spans)
			got, err := await(t, ch)
			is.NoErr(err)
			last := map[string]int{}
			for i, ev := range got {
				if i > 0 && gapless {
					is.Equal(ev.ID, got[i-1].ID+1) // no gap, no repeat
				}
				if i > 0 {
					is.True(ev.ID > got[i-1].ID) // in order, no repeat
				}
				var v int
				is.NoErr(json.Unmarshal(ev.Value, &v))
				if p, ok := last[ev.Key]; ok {
					is.Equal(v, p+1) // each writer's writes in its order
				}
				last[ev.Key] = v
			}
		}},
		{"ManyWaiters", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			const n = 100
			var wg sync.WaitGroup
			errs := make(chan error, 2*n)
			for i := range n {
				wg.Go(func() {
					_, err := st.WaitKey(ctx, "shared", 0)
					errs <- err
				})
				wg.Go(func() {
					_, err := st.WaitKey(ctx, fmt.Sprintf("own/%d", i), 0)
					errs <- err
				})
			}
			parked(t, st, 2*n)
			_, err := st.Set(ctx, "shared", 1) // wakes n waiters at once
			is.NoErr(err)
			items := make([]state.Item, n)
			for i := range items {
				items[i] = state.Item{Key: fmt.Sprintf("own/%d", i), Value: i}
			}
			_, err = st.SetMany(ctx, items)
			is.NoErr(err)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(waitDeadline):
				t.Fatalf("%d waiters still wait", st.Waiting())
			}
			close(errs)
			for err := range errs {
				is.NoErr(err)
			}
		}},
		{"CloseEndsWaiters", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			st, _ := waitEnv(t, e, time.Hour)
			key := async(func() (state.Entry, error) { return st.WaitKey(ctx, "k", 0) })
			watch := async(func() (state.Event, error) {
				for ev, err := range st.Watch(ctx, state.WatchQuery{}) {
					return ev, err
				}
				return state.Event{}, nil
			})
			parked(t, st, 2)
			is.NoErr(st.Close())
			_, err := await(t, key)
			is.True(errors.Is(err, state.ErrClosed))
			_, err = await(t, watch)
			is.True(errors.Is(err, state.ErrClosed))
			_, err = st.WaitKey(ctx, "k", 0)
			is.True(errors.Is(err, state.ErrClosed))
		}},
	}
}

// unhide returns the driver HideOptional hid, or d.
func unhide(d backend.Driver) backend.Driver {
	if p, ok := d.(plainDriver); ok {
		return p.Driver
	}
	return d
}
