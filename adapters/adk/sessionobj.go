package adk

import (
	"iter"
	"maps"
	"strings"
	"sync"
	"time"

	"google.golang.org/adk/v2/session"
)

// Session is the session.Session a SessionService returns. Its state and
// events are a snapshot taken when it was read, kept up to date by the
// AppendEvent calls made with it. It is safe for concurrent use.
type Session struct {
	app, user, id string

	mu      sync.RWMutex
	state   map[string]any // own state merged with "app:" and "user:" keys
	events  []*session.Event
	updated time.Time
	// version is the store version of the session entry this snapshot
	// reflects; AppendEvent refuses the session once the entry moved on.
	version int64
}

var _ session.Session = (*Session)(nil)

func newSession(app, user, id string, ss storedSession, appState, userState map[string]any) *Session {
	return &Session{app: app, user: user, id: id, state: mergeScopes(ss.State, appState, userState),
		updated: ss.Updated}
}

// mergeScopes returns the state a session shows: its own keys, plus the app
// and user state under their prefixes.
func mergeScopes(own, app, user map[string]any) map[string]any {
	m := make(map[string]any, len(own)+len(app)+len(user))
	maps.Copy(m, own)
	for k, v := range app {
		m[session.KeyPrefixApp+k] = v
	}
	for k, v := range user {
		m[session.KeyPrefixUser+k] = v
	}
	return m
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// AppName returns the app name.
func (s *Session) AppName() string { return s.app }

// UserID returns the user id.
func (s *Session) UserID() string { return s.user }

// State returns the session's state: its own keys and the app and user
// state under their "app:" and "user:" prefixes. Set changes this snapshot
// only; state reaches the store through an event's StateDelta.
func (s *Session) State() session.State { return &sessionState{s: s} }

// Events returns the session's events, oldest first.
func (s *Session) Events() session.Events {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return events(s.events)
}

// LastUpdateTime returns when the session was created or last appended to.
func (s *Session) LastUpdateTime() time.Time {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.updated
}

// applied records in the snapshot an event AppendEvent has stored: the
// event (as stored, without "temp:" keys), every key of its state delta
// ("temp:" ones too, which live until the invocation ends), the new update
// time and store version.
func (s *Session) applied(stored *session.Event, delta map[string]any, updated time.Time, version int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	maps.Copy(s.state, delta)
	s.events = append(s.events, stored)
	s.updated = updated
	s.version = version
}

// snapshot returns the version and update time AppendEvent checks.
func (s *Session) snapshot() (int64, time.Time) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.version, s.updated
}

type sessionState struct{ s *Session }

func (st *sessionState) Get(key string) (any, error) {
	st.s.mu.RLock()
	defer st.s.mu.RUnlock()
	v, ok := st.s.state[key]
	if !ok {
		return nil, session.ErrStateKeyNotExist
	}
	return v, nil
}

func (st *sessionState) Set(key string, value any) error {
	st.s.mu.Lock()
	defer st.s.mu.Unlock()
	st.s.state[key] = value
	return nil
}

func (st *sessionState) All() iter.Seq2[string, any] {
	st.s.mu.RLock()
	m := maps.Clone(st.s.state)
	st.s.mu.RUnlock()
	return func(yield func(string, any) bool) {
		for k, v := range m {
			if !yield(k, v) {
				return
			}
		}
	}
}

type events []*session.Event

func (e events) All() iter.Seq[*session.Event] {
	return func(yield func(*session.Event) bool) {
		for _, ev := range e {
			if !yield(ev) {
				return
			}
		}
	}
}

func (e events) Len() int { return len(e) }

func (e events) At(i int) *session.Event {
	if i < 0 || i >= len(e) {
		return nil
	}
	return e[i]
}

// withoutTemp returns ev with the "temp:" keys of its state delta removed,
// copying it only when there are some.
func withoutTemp(ev *session.Event) *session.Event {
	n := 0
	for k := range ev.Actions.StateDelta {
		if strings.HasPrefix(k, session.KeyPrefixTemp) {
			n++
		}
	}
	if n == 0 {
		return ev
	}
	c := *ev
	c.Actions.StateDelta = make(map[string]any, len(ev.Actions.StateDelta)-n)
	for k, v := range ev.Actions.StateDelta {
		if !strings.HasPrefix(k, session.KeyPrefixTemp) {
			c.Actions.StateDelta[k] = v
		}
	}
	return &c
}
