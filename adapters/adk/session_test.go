package adk_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/adk"
	"github.com/statesidecar/state/internal/storetest"
	"google.golang.org/adk/v2/session"
	"google.golang.org/adk/v2/session/sessiontestsuite"
)

// TestSessionServiceSuite runs ADK's own conformance suite for session
// services on every backend.
func TestSessionServiceSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		sessiontestsuite.RunServiceTests(t, sessiontestsuite.SuiteOptions{SupportsUserProvidedSessionID: true},
			func(t *testing.T) session.Service {
				fresh := storetest.New(t, b.Name)
				return adk.NewSessionService(storetest.Open(t, fresh.URL, nil), nil)
			})
	})
}

func newService(t *testing.T, b storetest.Backend) (*adk.SessionService, *state.Store) {
	st := storetest.Open(t, b.URL, nil)
	return adk.NewSessionService(st, nil), st
}

func TestStaleSessionIsRefused(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		svc, _ := newService(t, b)
		created, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u", SessionID: "s"})
		is.NoErr(err)
		got, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
		is.NoErr(err)
		// Two holders of the same session: the first appends, the second's
		// copy is now stale.
		is.NoErr(svc.AppendEvent(ctx, created.Session, event("e1", map[string]any{"k": "first"})))
		is.NoErr(svc.AppendEvent(ctx, created.Session, event("e2", nil))) // its own appends keep it fresh
		err = svc.AppendEvent(ctx, got.Session, event("e3", map[string]any{"k": "stale"}))
		is.True(errors.Is(err, adk.ErrStaleSession)) // a session read before another writer appended is refused
		again, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: "s"})
		is.NoErr(err)
		is.Equal(again.Session.Events().Len(), 2) // and nothing of the refused append was stored
		v, _ := again.Session.State().Get("k")
		is.Equal(v, "first")
		is.NoErr(svc.AppendEvent(ctx, again.Session, event("e3", nil))) // a fresh read may append
	})
}

func TestAppendEventMergesScopesAndDropsTemp(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		svc, _ := newService(t, b)
		s1, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u1",
			State: map[string]any{"app:theme": "dark", "user:lang": "fr", "temp:x": 1, "draft": "a"}})
		is.NoErr(err)
		is.NoErr(svc.AppendEvent(ctx, s1.Session, event("e1", map[string]any{"app:n": 1.0, "user:n": 2.0, "temp:scratch": "t", "n": 3.0})))
		v, err := s1.Session.State().Get("temp:scratch")
		is.NoErr(err)
		is.Equal(v, "t") // temp keys stay in the live session for the invocation
		got, err := svc.Get(ctx, &session.GetRequest{AppName: "app", UserID: "u1", SessionID: s1.Session.ID()})
		is.NoErr(err)
		st := map[string]any{}
		for k, v := range got.Session.State().All() {
			st[k] = v
		}
		is.Equal(st, map[string]any{"app:theme": "dark", "app:n": 1.0, "user:lang": "fr", "user:n": 2.0, "draft": "a", "n": 3.0}) // no temp key is stored
		_, hasTemp := got.Session.Events().At(0).Actions.StateDelta["temp:scratch"]
		is.True(!hasTemp) // nor in the stored event
		other, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u2"})
		is.NoErr(err)
		_, err = other.Session.State().Get("user:lang")
		is.True(errors.Is(err, session.ErrStateKeyNotExist)) // user state is per user
		v, _ = other.Session.State().Get("app:n")
		is.Equal(v, 1.0) // app state is shared
	})
}

// Replicas appending to different sessions of one user at the same time
// must not lose each other's user-state changes: the merge is atomic.
func TestConcurrentAppendsKeepEveryScopeChange(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		const writers, rounds = 6, 5
		sessions := make([]session.Session, writers)
		for w := range writers {
			svc, _ := newService(t, b) // a store per writer, as separate replicas have
			c, err := svc.Create(ctx, &session.CreateRequest{AppName: "app", UserID: "u"})
			is.NoErr(err)
			sessions[w] = c.Session
		}
		svcs := make([]*adk.SessionService, writers)
		for w := range writers {
			svcs[w], _ = newService(t, b)
		}
		start := make(chan struct{})
		var wg, midway sync.WaitGroup
		midway.Add(writers)
		var seq atomic.Int64
		starts, ends := make([]int64, writers), make([]int64, writers)
		for w := range writers {
			wg.Go(func() {
				<-start
				starts[w] = seq.Add(1)
				defer func() { ends[w] = seq.Add(1) }()
				for r := range rounds {
					if r == 1 {
						midway.Done()
						midway.Wait() // every writer has appended before any goes on
					}
					key := fmt.Sprintf("user:w%d-r%d", w, r)
					if err := svcs[w].AppendEvent(ctx, sessions[w], event(key, map[string]any{key: true, "app:last": w})); err != nil {
						t.Errorf("append: %v", err)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		is.True(overlapped(starts, ends)) // the writers ran at the same time
		got, err := svcs[0].Get(ctx, &session.GetRequest{AppName: "app", UserID: "u", SessionID: sessions[0].ID()})
		is.NoErr(err)
		for w := range writers {
			for r := range rounds {
				key := fmt.Sprintf("user:w%d-r%d", w, r)
				if _, err := got.Session.State().Get(key); err != nil {
					t.Errorf("%s was lost", key)
				}
			}
		}
		is.Equal(got.Session.Events().Len(), rounds)
	})
}

func TestListPagesAndDeleteRemovesEvents(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		svc, st := newService(t, b)
		for i := range 230 { // more than two pages
			_, err := svc.Create(ctx, &session.CreateRequest{AppName: "a/b", UserID: fmt.Sprintf("user %d", i%3), SessionID: fmt.Sprintf("s/%d", i)})
			is.NoErr(err)
		}
		_, err := svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "x", SessionID: "other app"})
		is.NoErr(err)
		all, err := svc.List(ctx, &session.ListRequest{AppName: "a/b"})
		is.NoErr(err)
		is.Equal(len(all.Sessions), 230) // every session of the app, none of another app whose name is a prefix
		one, err := svc.List(ctx, &session.ListRequest{AppName: "a/b", UserID: "user 1"})
		is.NoErr(err)
		is.Equal(len(one.Sessions), 77)
		for _, s := range one.Sessions {
			is.Equal(s.UserID(), "user 1")
		}
		// A listed session can be appended to.
		is.NoErr(svc.AppendEvent(ctx, one.Sessions[0], event("e", nil)))
		for i := range 150 {
			is.NoErr(svc.AppendEvent(ctx, one.Sessions[0], event(fmt.Sprint(i), nil)))
		}
		req := &session.GetRequest{AppName: "a/b", UserID: "user 1", SessionID: one.Sessions[0].ID()}
		got, err := svc.Get(ctx, req)
		is.NoErr(err)
		is.Equal(got.Session.Events().Len(), 151)
		is.Equal(got.Session.Events().At(150).ID, "149") // oldest first
		req.NumRecentEvents = 120
		got, err = svc.Get(ctx, req)
		is.NoErr(err)
		is.Equal(got.Session.Events().Len(), 120)
		is.Equal(got.Session.Events().At(0).ID, "30")
		is.NoErr(svc.Delete(ctx, &session.DeleteRequest{AppName: "a/b", UserID: "user 1", SessionID: one.Sessions[0].ID()}))
		left, err := st.List(ctx, adk.DefaultPrefix+"ev/")
		is.NoErr(err)
		is.Equal(len(left.Keys), 0) // the events are gone with the session
		_, err = svc.Get(ctx, &session.GetRequest{AppName: "a/b", UserID: "user 1", SessionID: one.Sessions[0].ID()})
		is.True(errors.Is(err, adk.ErrSessionNotFound))
		// A new session with the same id starts empty.
		again, err := svc.Create(ctx, &session.CreateRequest{AppName: "a/b", UserID: "user 1", SessionID: one.Sessions[0].ID()})
		is.NoErr(err)
		is.Equal(again.Session.Events().Len(), 0)
	})
}

func TestBadInputIsRefused(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	svc, _ := newService(t, storetest.New(t, "memory"))
	_, err := svc.Create(ctx, &session.CreateRequest{AppName: "a"})
	is.True(err != nil) // user id is required
	_, err = svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: "s", NumRecentEvents: -1})
	is.True(err != nil) // a negative event count is refused
	_, err = svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u", State: map[string]any{"f": func() {}}})
	is.True(errors.Is(err, state.ErrInvalid)) // state that is not JSON is refused by the store
	l, err := svc.List(ctx, &session.ListRequest{AppName: "a"})
	is.NoErr(err)
	is.Equal(len(l.Sessions), 0) // and nothing was created
	c, err := svc.Create(ctx, &session.CreateRequest{AppName: "a", UserID: "u"})
	is.NoErr(err)
	err = svc.AppendEvent(ctx, c.Session, event("big", map[string]any{"blob": string(make([]byte, 2<<20))}))
	is.True(errors.Is(err, state.ErrInvalid)) // an event over the store's value limit is refused
	got, err := svc.Get(ctx, &session.GetRequest{AppName: "a", UserID: "u", SessionID: c.Session.ID()})
	is.NoErr(err)
	is.Equal(got.Session.Events().Len(), 0) // and not stored
}

func event(id string, delta map[string]any) *session.Event {
	return &session.Event{ID: id, Author: "user", InvocationID: "inv", Timestamp: time.Now(),
		Actions: session.EventActions{StateDelta: delta}}
}
