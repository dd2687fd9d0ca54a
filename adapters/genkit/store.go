// Package genkit backs Genkit for Go's sessions (the experimental
// github.com/firebase/genkit/go/core/x/session) with a state.Store:
// SessionStore implements session.Store, so that a session's state is
// durable and shared by every process that opens the same store.
//
//	st, _ := state.Open(ctx, "sqlite:///var/lib/agent/state.db")
//	store := genkit.NewSessionStore[Cart](st, nil)
//	sess, _ := session.New(ctx, session.WithStore[Cart](store), session.WithInitialState(Cart{}))
//	ctx = session.NewContext(ctx, sess) // flows and prompts read {{@state}} from it
//
// Each session is one of the store's session snapshots (Store.SetSession),
// under the id "<prefix><session id>" (prefix "genkit/" by default), so the
// store's history records who saved it, and its size. Genkit's interface
// carries no version, so concurrent saves of one session from two processes
// are last-writer-wins, as with Genkit's own stores.
package genkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/firebase/genkit/go/core/x/session"
	"github.com/statesidecar/state"
)

// DefaultPrefix starts the store's session id of every Genkit session.
const DefaultPrefix = "genkit/"

// Options configure a SessionStore. A nil *Options means all defaults.
type Options struct {
	// Prefix starts the store's session id of every Genkit session.
	// Defaults to DefaultPrefix.
	Prefix string
	// TTL makes a session expire this long after it was last saved.
	// Defaults to 0: sessions live until deleted.
	TTL time.Duration
	// AgentID is recorded as the writer, for the store's history.
	AgentID string
}

// SessionStore keeps Genkit sessions whose state has type S in a
// state.Store. S must survive a JSON round trip. It is safe for concurrent
// use.
type SessionStore[S any] struct {
	st     *state.Store
	prefix string
	opts   []state.SetOption
}

var _ session.Store[struct{}] = (*SessionStore[struct{}])(nil)

// NewSessionStore returns a session store over st; opts may be nil.
func NewSessionStore[S any](st *state.Store, opts *Options) *SessionStore[S] {
	s := &SessionStore[S]{st: st, prefix: DefaultPrefix}
	if opts != nil {
		if opts.Prefix != "" {
			s.prefix = opts.Prefix
		}
		if opts.TTL != 0 {
			s.opts = append(s.opts, state.WithTTL(opts.TTL))
		}
		if opts.AgentID != "" {
			s.opts = append(s.opts, state.WithAgent(opts.AgentID))
		}
	}
	return s
}

// Get returns the session with id, or nil (and no error) when there is none
// or it expired, as Genkit's interface asks.
func (s *SessionStore[S]) Get(ctx context.Context, id string) (*session.Data[S], error) {
	ss, err := s.st.GetSession(ctx, s.prefix+id)
	if errors.Is(err, state.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("genkit: reading session %q: %w", id, err)
	}
	d := new(session.Data[S])
	if err := json.Unmarshal(ss.Context, d); err != nil {
		return nil, fmt.Errorf("genkit: decoding session %q: %w", id, err)
	}
	return d, nil
}

// Save stores the session with id, replacing what was there.
func (s *SessionStore[S]) Save(ctx context.Context, id string, data *session.Data[S]) error {
	if data == nil {
		return fmt.Errorf("genkit: saving session %q: data is nil", id)
	}
	if _, err := s.st.SetSession(ctx, s.prefix+id, data, s.opts...); err != nil {
		return fmt.Errorf("genkit: saving session %q: %w", id, err)
	}
	return nil
}

// Delete removes the session with id and reports whether it existed.
// Genkit's interface has no delete; this is for the application.
func (s *SessionStore[S]) Delete(ctx context.Context, id string) (bool, error) {
	ok, err := s.st.DeleteSession(ctx, s.prefix+id)
	if err != nil {
		return false, fmt.Errorf("genkit: deleting session %q: %w", id, err)
	}
	return ok, nil
}
