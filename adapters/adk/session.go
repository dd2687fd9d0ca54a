// Package adk backs Google ADK for Go (google.golang.org/adk/v2) with a
// state.Store: SessionService implements session.Service and
// ArtifactService implements artifact.Service, so that an ADK agent's
// sessions and artifacts are durable, survive restarts of the agent's
// process and are shared by every replica that opens the same store
// (SQLite file, Redis, PostgreSQL).
//
// # Layout
//
// Everything lives in key-value entries of the store's namespace under a
// prefix (default "adk/"), with the app name, user id and session id
// path-escaped:
//
//	adk/app/<app>                          app-scoped state ("app:" keys)
//	adk/user/<app>/<user>                  user-scoped state ("user:" keys)
//	adk/sess/<app>/<user>/<session>        the session: its own state, event count, last update
//	adk/ev/<app>/<user>/<session>/<incarnation>/<n>   event n (20 digits) as ADK's JSON
//	adk/art/...                            artifacts (see ArtifactService)
//
// AppendEvent writes the event, the session and the app and user state it
// changes in one atomic Store.Update, so that replicas appending to
// different sessions of one user never lose each other's state changes, and
// refuses a stale session: one whose events another writer extended since
// it was read.
package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/statesidecar/state"
	"google.golang.org/adk/v2/platform"
	"google.golang.org/adk/v2/session"
)

// ErrStaleSession is returned by AppendEvent when the session it was given
// is older than the stored one: another process or goroutine appended to the
// session after it was read. Get the session again and retry.
var ErrStaleSession = errors.New("stale session: it was changed by another writer since it was read")

// ErrSessionNotFound is returned by Get and AppendEvent for a session that
// does not exist (or belongs to another app or user).
var ErrSessionNotFound = errors.New("session not found")

// ErrSessionExists is returned by Create for a session id already taken.
var ErrSessionExists = errors.New("session already exists")

// DefaultPrefix starts every key the adapter writes.
const DefaultPrefix = "adk/"

// Options configure a SessionService or an ArtifactService. A nil *Options
// means all defaults.
type Options struct {
	// Prefix starts every key the service writes. Defaults to DefaultPrefix.
	Prefix string
	// AgentID is recorded as the writer of every entry, for the store's
	// history. Defaults to "".
	AgentID string
}

func (o *Options) prefix() string {
	if o == nil || o.Prefix == "" {
		return DefaultPrefix
	}
	return o.Prefix
}

func (o *Options) agent() string {
	if o == nil {
		return ""
	}
	return o.AgentID
}

// SessionService is a session.Service over a state.Store. It is safe for
// concurrent use, and several processes may share one store.
type SessionService struct {
	st     *state.Store
	prefix string
	agent  string
}

var _ session.Service = (*SessionService)(nil)

// NewSessionService returns a session service over st; opts may be nil.
func NewSessionService(st *state.Store, opts *Options) *SessionService {
	return &SessionService{st: st, prefix: opts.prefix(), agent: opts.agent()}
}

// storedSession is the value of a session's entry.
type storedSession struct {
	// State is the session-scoped state (no "app:", "user:", "temp:" keys).
	State map[string]any `json:"state"`
	// Events is the number of events appended so far.
	Events int64 `json:"events"`
	// Incarnation tells this session's events from those of an earlier
	// session with the same id that was deleted.
	Incarnation string `json:"incarnation"`
	// Updated is the last update time, as RFC 3339 with nanoseconds.
	Updated time.Time `json:"updated"`
}

func esc(s string) string { return url.PathEscape(s) }

func (s *SessionService) appKey(app string) string { return s.prefix + "app/" + esc(app) }
func (s *SessionService) userKey(app, user string) string {
	return s.prefix + "user/" + esc(app) + "/" + esc(user)
}
func (s *SessionService) sessionKey(app, user, id string) string {
	return s.prefix + "sess/" + esc(app) + "/" + esc(user) + "/" + esc(id)
}
func (s *SessionService) eventPrefix(app, user, id, inc string) string {
	return s.prefix + "ev/" + esc(app) + "/" + esc(user) + "/" + esc(id) + "/" + inc + "/"
}
func (s *SessionService) eventKey(app, user, id, inc string, n int64) string {
	return fmt.Sprintf("%s%020d", s.eventPrefix(app, user, id, inc), n)
}

// Create creates a session. A request without SessionID gets a random one;
// a SessionID already taken is an error matching ErrSessionExists. "app:"
// and "user:" keys of the initial state are merged into the app and user
// state, "temp:" keys are dropped, and the rest is the session's own state.
func (s *SessionService) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	if req == nil || req.AppName == "" || req.UserID == "" {
		return nil, errors.New("adk: create session: app_name and user_id are required")
	}
	id := req.SessionID
	if id == "" {
		id = uuid.NewString()
	}
	appDelta, userDelta, own := splitDelta(req.State)
	inc := uuid.NewString()[:8]
	keys := []string{s.sessionKey(req.AppName, req.UserID, id), s.appKey(req.AppName), s.userKey(req.AppName, req.UserID)}
	var sess *Session
	out, err := s.st.Update(ctx, keys, func(cur []state.Entry) ([]state.Write, error) {
		if cur[0].Found() {
			return nil, fmt.Errorf("%w: %q", ErrSessionExists, id)
		}
		app, user, err := decodeScopes(cur[1], cur[2])
		if err != nil {
			return nil, err
		}
		ss := storedSession{State: own, Incarnation: inc, Updated: platform.Now(ctx).UTC()}
		writes := []state.Write{{Key: keys[0], Value: ss, AgentID: s.agent}}
		writes = s.mergeScope(writes, keys[1], app, appDelta)
		writes = s.mergeScope(writes, keys[2], user, userDelta)
		sess = newSession(req.AppName, req.UserID, id, ss, app, user)
		return writes, nil
	})
	if err != nil {
		return nil, fmt.Errorf("adk: create session: %w", err)
	}
	sess.version = out[0].Version
	return &session.CreateResponse{Session: sess}, nil
}

// mergeScope appends the write of an app or user state with delta merged
// into cur, if delta changes anything.
func (s *SessionService) mergeScope(writes []state.Write, key string, cur, delta map[string]any) []state.Write {
	if len(delta) == 0 {
		return writes
	}
	maps.Copy(cur, delta)
	return append(writes, state.Write{Key: key, Value: cur, AgentID: s.agent})
}

// splitDelta sorts a state map into app-scoped, user-scoped (both without
// their prefix) and session-scoped keys, dropping "temp:" keys.
func splitDelta(m map[string]any) (app, user, own map[string]any) {
	app, user, own = map[string]any{}, map[string]any{}, map[string]any{}
	for k, v := range m {
		switch {
		case strings.HasPrefix(k, session.KeyPrefixApp):
			app[strings.TrimPrefix(k, session.KeyPrefixApp)] = v
		case strings.HasPrefix(k, session.KeyPrefixUser):
			user[strings.TrimPrefix(k, session.KeyPrefixUser)] = v
		case strings.HasPrefix(k, session.KeyPrefixTemp):
		default:
			own[k] = v
		}
	}
	return app, user, own
}

// decodeScopes decodes the app and user state entries (empty when absent).
func decodeScopes(appE, userE state.Entry) (app, user map[string]any, err error) {
	app, user = map[string]any{}, map[string]any{}
	if appE.Found() {
		if err := appE.Decode(&app); err != nil {
			return nil, nil, fmt.Errorf("decoding app state: %w", err)
		}
	}
	if userE.Found() {
		if err := userE.Decode(&user); err != nil {
			return nil, nil, fmt.Errorf("decoding user state: %w", err)
		}
	}
	return app, user, nil
}

func decodeSession(e state.Entry) (storedSession, error) {
	var ss storedSession
	if err := json.Unmarshal(e.Value, &ss); err != nil {
		return ss, fmt.Errorf("decoding session %s: %w", e.Key, err)
	}
	if ss.State == nil {
		ss.State = map[string]any{}
	}
	return ss, nil
}

// Get returns a session with its state (its own merged with the app and
// user state) and its events, oldest first. NumRecentEvents keeps only the
// newest ones; After keeps those whose timestamp is not before it (events
// are assumed to be appended in timestamp order, as ADK's own services do).
func (s *SessionService) Get(ctx context.Context, req *session.GetRequest) (*session.GetResponse, error) {
	if req == nil || req.AppName == "" || req.UserID == "" || req.SessionID == "" {
		return nil, errors.New("adk: get session: app_name, user_id and session_id are required")
	}
	if req.NumRecentEvents < 0 {
		return nil, fmt.Errorf("adk: get session: num_recent_events must not be negative, got %d", req.NumRecentEvents)
	}
	keys := []string{s.sessionKey(req.AppName, req.UserID, req.SessionID), s.appKey(req.AppName), s.userKey(req.AppName, req.UserID)}
	es, err := s.st.GetMany(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("adk: get session: %w", err)
	}
	if !es[0].Found() {
		return nil, fmt.Errorf("adk: get session %q: %w", req.SessionID, ErrSessionNotFound)
	}
	ss, err := decodeSession(es[0])
	if err != nil {
		return nil, fmt.Errorf("adk: get session: %w", err)
	}
	app, user, err := decodeScopes(es[1], es[2])
	if err != nil {
		return nil, fmt.Errorf("adk: get session: %w", err)
	}
	events, err := s.readEvents(ctx, req, ss)
	if err != nil {
		return nil, fmt.Errorf("adk: get session: %w", err)
	}
	sess := newSession(req.AppName, req.UserID, req.SessionID, ss, app, user)
	sess.version = es[0].Version
	sess.events = events
	return &session.GetResponse{Session: sess}, nil
}

// eventBatch is how many events one read fetches.
const eventBatch = 100

// readEvents reads the events of a session selected by req, newest batch
// first, stopping at NumRecentEvents or at the first event before After.
// Events are immutable once written and numbered 1..ss.Events, so reading
// them after the session entry gives a consistent view.
func (s *SessionService) readEvents(ctx context.Context, req *session.GetRequest, ss storedSession) ([]*session.Event, error) {
	var rev []*session.Event // newest first
	for hi := ss.Events; hi >= 1; hi -= eventBatch {
		lo := max(hi-eventBatch+1, 1)
		keys := make([]string, 0, hi-lo+1)
		for n := hi; n >= lo; n-- {
			keys = append(keys, s.eventKey(req.AppName, req.UserID, req.SessionID, ss.Incarnation, n))
		}
		es, err := s.st.GetMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if !e.Found() {
				return nil, fmt.Errorf("event %s is missing", e.Key)
			}
			ev := new(session.Event)
			if err := json.Unmarshal(e.Value, ev); err != nil {
				return nil, fmt.Errorf("decoding event %s: %w", e.Key, err)
			}
			if !req.After.IsZero() && ev.Timestamp.Before(req.After) {
				return reverse(rev), nil
			}
			rev = append(rev, ev)
			if req.NumRecentEvents > 0 && len(rev) == req.NumRecentEvents {
				return reverse(rev), nil
			}
		}
	}
	return reverse(rev), nil
}

func reverse(evs []*session.Event) []*session.Event {
	out := make([]*session.Event, len(evs))
	for i, e := range evs {
		out[len(evs)-1-i] = e
	}
	return out
}
