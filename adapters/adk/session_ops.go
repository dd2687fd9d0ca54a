package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/statesidecar/state"
	"google.golang.org/adk/v2/platform"
	"google.golang.org/adk/v2/session"
)

// AppendEvent stores event as the next event of sess and applies its state
// delta: "app:" and "user:" keys to the app and user state, "temp:" keys to
// nothing stored (they stay in sess for the rest of the invocation), the
// others to the session's own state. The event, the session and the app and
// user state are written in one atomic commit. Partial (streaming) events
// are not stored.
//
// The stale-session check: AppendEvent fails with ErrStaleSession, storing
// nothing, when the stored session moved on since sess was read (another
// process or goroutine appended to it). sess is normally a *Session this
// service returned; for another implementation of session.Session the check
// compares its LastUpdateTime with the stored one, as ADK's database service
// does.
func (s *SessionService) AppendEvent(ctx context.Context, sess session.Session, event *session.Event) error {
	if sess == nil {
		return errors.New("adk: append event: session is nil")
	}
	if event == nil {
		return errors.New("adk: append event: event is nil")
	}
	if event.Partial {
		return nil
	}
	own, _ := sess.(*Session)
	var version int64
	updated := sess.LastUpdateTime()
	if own != nil {
		version, updated = own.snapshot()
	}
	stored := withoutTemp(event)
	raw, err := json.Marshal(stored)
	if err != nil {
		return fmt.Errorf("adk: append event: encoding the event: %w", err)
	}
	when := event.Timestamp
	if when.IsZero() {
		when = platform.Now(ctx)
	}
	appDelta, userDelta, ownDelta := splitDelta(event.Actions.StateDelta)
	app, user, id := sess.AppName(), sess.UserID(), sess.ID()
	keys := []string{s.sessionKey(app, user, id), s.appKey(app), s.userKey(app, user)}
	out, err := s.st.Update(ctx, keys, func(cur []state.Entry) ([]state.Write, error) {
		if !cur[0].Found() {
			return nil, fmt.Errorf("%w: %q", ErrSessionNotFound, id)
		}
		ss, err := decodeSession(cur[0])
		if err != nil {
			return nil, err
		}
		switch {
		case version != 0 && cur[0].Version != version:
			return nil, ErrStaleSession
		case version == 0 && ss.Updated.UnixMicro() > updated.UnixMicro():
			return nil, fmt.Errorf("%w: last update time of the session given (%s) is older than the stored one (%s)",
				ErrStaleSession, updated.Format(timeFormat), ss.Updated.Format(timeFormat))
		}
		appState, userState, err := decodeScopes(cur[1], cur[2])
		if err != nil {
			return nil, err
		}
		ss.Events++
		maps.Copy(ss.State, ownDelta)
		ss.Updated = when.UTC()
		writes := []state.Write{
			{Key: keys[0], Value: ss, AgentID: s.agent},
			{Key: s.eventKey(app, user, id, ss.Incarnation, ss.Events), Value: json.RawMessage(raw), AgentID: s.agent},
		}
		writes = s.mergeScope(writes, keys[1], appState, appDelta)
		writes = s.mergeScope(writes, keys[2], userState, userDelta)
		return writes, nil
	})
	if err != nil {
		return fmt.Errorf("adk: append event to session %q: %w", id, err)
	}
	if own != nil {
		own.applied(stored, event.Actions.StateDelta, when, out[0].Version)
	}
	return nil
}

const timeFormat = "2006-01-02T15:04:05.000000Z07:00"

// listPage is how many sessions one read of List fetches.
const listPage = 100

// List returns the sessions of an app, or of one user of it when UserID is
// set, without their events, each with its state merged with the app and
// user state.
func (s *SessionService) List(ctx context.Context, req *session.ListRequest) (*session.ListResponse, error) {
	if req == nil || req.AppName == "" {
		return nil, errors.New("adk: list sessions: app_name is required")
	}
	prefix := s.prefix + "sess/" + esc(req.AppName) + "/"
	if req.UserID != "" {
		prefix += esc(req.UserID) + "/"
	}
	appE, err := s.st.GetMany(ctx, []string{s.appKey(req.AppName)})
	if err != nil {
		return nil, fmt.Errorf("adk: list sessions: %w", err)
	}
	appState, _, err := decodeScopes(appE[0], state.Entry{})
	if err != nil {
		return nil, fmt.Errorf("adk: list sessions: %w", err)
	}
	users := map[string]map[string]any{}
	out := make([]session.Session, 0)
	cursor := ""
	for {
		page, err := s.st.List(ctx, prefix, state.WithLimit(listPage), state.WithCursor(cursor))
		if err != nil {
			return nil, fmt.Errorf("adk: list sessions: %w", err)
		}
		if err := s.listPage(ctx, req.AppName, page.Keys, appState, users, &out); err != nil {
			return nil, fmt.Errorf("adk: list sessions: %w", err)
		}
		if page.NextCursor == "" {
			return &session.ListResponse{Sessions: out}, nil
		}
		cursor = page.NextCursor
	}
}

// listPage reads the sessions of one page of keys and the user state of
// users not seen yet, appending the sessions to out.
func (s *SessionService) listPage(ctx context.Context, app string, keys []string, appState map[string]any,
	users map[string]map[string]any, out *[]session.Session) error {
	if len(keys) == 0 {
		return nil
	}
	es, err := s.st.GetMany(ctx, keys)
	if err != nil {
		return err
	}
	var newUsers []string
	ids := make([][2]string, len(keys))
	for i, k := range keys {
		rest := strings.TrimPrefix(k, s.prefix+"sess/"+esc(app)+"/")
		u, sid, ok := strings.Cut(rest, "/")
		user, err1 := url.PathUnescape(u)
		id, err2 := url.PathUnescape(sid)
		if !ok || err1 != nil || err2 != nil {
			return fmt.Errorf("unexpected session key %q", k)
		}
		ids[i] = [2]string{user, id}
		if _, seen := users[user]; !seen {
			users[user] = nil
			newUsers = append(newUsers, user)
		}
	}
	if len(newUsers) > 0 {
		ukeys := make([]string, len(newUsers))
		for i, u := range newUsers {
			ukeys[i] = s.userKey(app, u)
		}
		ues, err := s.st.GetMany(ctx, ukeys)
		if err != nil {
			return err
		}
		for i, u := range newUsers {
			_, us, err := decodeScopes(state.Entry{}, ues[i])
			if err != nil {
				return err
			}
			users[u] = us
		}
	}
	for i, e := range es {
		if !e.Found() { // deleted since the listing
			continue
		}
		ss, err := decodeSession(e)
		if err != nil {
			return err
		}
		sess := newSession(app, ids[i][0], ids[i][1], ss, appState, users[ids[i][0]])
		sess.version = e.Version
		*out = append(*out, sess)
	}
	return nil
}

// Delete deletes a session and its events. Deleting a missing session is not
// an error. The session disappears atomically; its events are then deleted
// in batches (should that be interrupted, the leftovers belong to an
// incarnation no later session with the same id reads).
func (s *SessionService) Delete(ctx context.Context, req *session.DeleteRequest) error {
	if req == nil || req.AppName == "" || req.UserID == "" || req.SessionID == "" {
		return errors.New("adk: delete session: app_name, user_id and session_id are required")
	}
	key := s.sessionKey(req.AppName, req.UserID, req.SessionID)
	inc := ""
	_, err := s.st.Update(ctx, []string{key}, func(cur []state.Entry) ([]state.Write, error) {
		inc = ""
		if !cur[0].Found() {
			return nil, nil
		}
		ss, err := decodeSession(cur[0])
		if err != nil {
			return nil, err
		}
		inc = ss.Incarnation
		return []state.Write{{Key: key, Delete: true, AgentID: s.agent}}, nil
	})
	if err != nil {
		return fmt.Errorf("adk: delete session %q: %w", req.SessionID, err)
	}
	if inc == "" {
		return nil
	}
	if err := s.deletePrefix(ctx, s.eventPrefix(req.AppName, req.UserID, req.SessionID, inc)); err != nil {
		return fmt.Errorf("adk: delete session %q: deleting its events: %w", req.SessionID, err)
	}
	return nil
}

// deletePrefix deletes every entry under prefix, a batch per commit.
func (s *SessionService) deletePrefix(ctx context.Context, prefix string) error {
	return deletePrefix(ctx, s.st, prefix, s.agent)
}

// deletePrefix deletes every entry of st under prefix, a batch per commit.
func deletePrefix(ctx context.Context, st *state.Store, prefix, agent string) error {
	for {
		page, err := st.List(ctx, prefix, state.WithLimit(listPage))
		if err != nil {
			return err
		}
		if len(page.Keys) == 0 {
			return nil
		}
		_, err = st.Update(ctx, page.Keys, func(cur []state.Entry) ([]state.Write, error) {
			ws := make([]state.Write, len(cur))
			for i, e := range cur {
				ws[i] = state.Write{Key: e.Key, Delete: true, AgentID: agent}
			}
			return ws, nil
		})
		if err != nil {
			return err
		}
	}
}
