package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/statesidecar/state"
)

// The results of the session and history tools, fields in the Python
// sidecar's order followed by the new ones.
type (
	saveResult struct {
		OK        bool   `json:"ok"`
		SessionID string `json:"session_id"`
	}
	restoreResult struct {
		Found     bool      `json:"found"`
		SessionID string    `json:"session_id"`
		Context   rawObject `json:"context" desc:"the saved JSON object, or null when not found"`
	}
	historyResult struct {
		Entries []historyEntry `json:"entries" desc:"newest first"`
		Total   int            `json:"total" desc:"the number of entries returned"`
	}
	historyEntry struct {
		ID            int64           `json:"id"`
		Key           string          `json:"key" desc:"the key, run id, resource id or session id"`
		NewValue      json.RawMessage `json:"new_value"`
		PreviousValue json.RawMessage `json:"previous_value"`
		AgentID       *string         `json:"agent_id"`
		WrittenAt     stamp           `json:"written_at"`
		Op            string          `json:"op" desc:"what happened, such as kv.set or workflow.claim"`
		Principal     *string         `json:"principal,omitempty" desc:"who the server authenticated as the writer (an OAuth subject or a token name), apart from the agent_id the writer claimed; absent when the server authenticated none"`
	}
)

func sessionSave(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	id := a.str("session_id")
	if _, err := st.SetSession(ctx, id, a.raw("context")); err != nil {
		return nil, err
	}
	return saveResult{OK: true, SessionID: id}, nil
}

func sessionRestore(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	id := a.str("session_id")
	s, err := st.GetSession(ctx, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return restoreResult{SessionID: id}, nil
	case err != nil:
		return nil, err
	}
	return restoreResult{Found: true, SessionID: id, Context: rawObject(s.Context)}, nil
}

func historyLog(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	n := int64(state.DefaultHistoryLimit)
	if a.has("n") {
		n = a.int("n")
	}
	evs, err := st.History(ctx, state.HistoryQuery{Key: a.str("key"), Limit: int(n)})
	if err != nil {
		return nil, err
	}
	out := historyResult{Entries: make([]historyEntry, len(evs)), Total: len(evs)}
	for i, e := range evs {
		out.Entries[i] = historyEntry{ID: e.ID, Key: e.Key, NewValue: e.Value, PreviousValue: e.Prev,
			AgentID: optStr(e.AgentID), WrittenAt: stamp(e.Time), Op: e.Op, Principal: optStr(e.Principal)}
	}
	return out, nil
}
