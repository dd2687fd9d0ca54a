package state

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A Session is a snapshot of an agent's conversational context.
type Session struct {
	ID string
	// Context is the saved JSON object.
	Context json.RawMessage
	// Version increases with every save.
	Version   int64
	AgentID   string
	UpdatedAt time.Time
	// ExpiresAt is zero for a session without TTL.
	ExpiresAt time.Time
}

// SetSession replaces the whole snapshot of session id with snapshot, which
// must encode to a JSON object. It honours WithTTL, WithAgent and IfVersion.
// History records who saved it and its size, not its content.
func (s *Store) SetSession(ctx context.Context, id string, snapshot any, opts ...SetOption) (Session, error) {
	ss, err := s.saveSession(ctx, id, snapshot, collect(opts))
	return ss, wrap("session.save", id, err)
}

func (s *Store) saveSession(ctx context.Context, id string, sctx any, o callOptions) (Session, error) {
	lim := s.c.opts.Limits
	if err := checkKey("session_id", id, lim.MaxKeyBytes); err != nil {
		return Session{}, err
	}
	if err := s.checkWrite(o); err != nil {
		return Session{}, err
	}
	val, err := encodeJSON("context", sctx, lim.MaxValueBytes)
	if err != nil {
		return Session{}, err
	}
	if len(val) == 0 || val[0] != '{' {
		return Session{}, invalid("context", "must be a JSON object")
	}
	if ctx, err = s.subjectCtx(ctx, o); err != nil {
		return Session{}, err
	}
	res, stamp, err := s.putRecord(ctx, layout.Session(id), val, o, backend.IntentAny,
		backend.Event{Key: id, Op: "session.save", Value: sizeJSON(len(val)), Writer: o.agent})
	if err != nil {
		return Session{}, err
	}
	ss := Session{ID: id, Context: val, Version: res.Revision, AgentID: o.agent, UpdatedAt: stamp}
	if o.ttl > 0 {
		ss.ExpiresAt = res.Now.Add(o.ttl)
	}
	return ss, nil
}

// sizeJSON is the history summary of a session snapshot.
func sizeJSON(n int) []byte { return []byte(`{"size":` + strconv.Itoa(n) + `}`) }

// GetSession returns the live snapshot of session id, or an error
// matching ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	r, err := s.getRecord(ctx, "session_id", id, layout.Session(id))
	if err != nil {
		return Session{}, wrap("session.restore", id, err)
	}
	return Session{ID: id, Context: r.Value, Version: r.Revision, AgentID: r.Writer,
		UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt}, nil
}

// DeleteSession removes session id and reports whether a live snapshot was
// deleted. It honours IfVersion and WithAgent (recorded in history).
func (s *Store) DeleteSession(ctx context.Context, id string, opts ...DeleteOption) (bool, error) {
	ok, err := s.deleteRecord(ctx, "session.delete", "session_id", id, layout.Session(id), collect(opts))
	return ok, wrap("session.delete", id, err)
}
