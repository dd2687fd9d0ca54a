package mcpadapter

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/statesidecar/state"
)

// The results of the key-value tools, fields in the Python sidecar's order
// followed by the new ones.
type (
	setResult struct {
		OK      bool  `json:"ok"`
		Version int64 `json:"version" desc:"the entry's new version, for if_version"`
	}
	getResult struct {
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
		Found     bool            `json:"found"`
		Version   *int64          `json:"version" desc:"the entry's version, for if_version"`
		AgentID   *string         `json:"agent_id"`
		UpdatedAt *stamp          `json:"updated_at"`
		ExpiresAt *stamp          `json:"expires_at"`
	}
	deleteResult struct {
		OK bool `json:"ok" desc:"true only when a live key was deleted"`
	}
	listResult struct {
		Keys       []string `json:"keys"`
		NextCursor *string  `json:"next_cursor" desc:"pass as cursor for the next page; null on the last page"`
	}
)

func stateSet(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	var opts []state.SetOption
	if a.has("ttl_seconds") {
		opts = append(opts, state.WithTTL(a.dur("ttl_seconds")))
	}
	if a.has("agent_id") {
		opts = append(opts, state.WithAgent(a.str("agent_id")))
	}
	if a.has("if_version") {
		opts = append(opts, state.IfVersion(a.int("if_version")))
	}
	e, err := st.Set(ctx, a.str("key"), a.raw("value"), opts...)
	if err != nil {
		return nil, err
	}
	return setResult{OK: true, Version: e.Version}, nil
}

func stateGet(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	key := a.str("key")
	e, err := st.Get(ctx, key)
	if errors.Is(err, state.ErrNotFound) {
		return getResult{Key: key}, nil
	}
	if err != nil {
		return nil, err
	}
	return getResult{Key: key, Value: e.Value, Found: true, Version: &e.Version, AgentID: optStr(e.AgentID),
		UpdatedAt: optStamp(e.UpdatedAt), ExpiresAt: optStamp(e.ExpiresAt)}, nil
}

func stateDelete(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	var opts []state.DeleteOption
	if a.has("if_version") {
		opts = append(opts, state.IfVersion(a.int("if_version")))
	}
	ok, err := st.Delete(ctx, a.str("key"), opts...)
	if err != nil {
		return nil, err
	}
	return deleteResult{OK: ok}, nil
}

func stateList(ctx context.Context, st *state.Store, a args, _ *Options) (any, error) {
	p, err := st.List(ctx, a.str("prefix"), pageOptions(a)...)
	if err != nil {
		return nil, err
	}
	return listResult{Keys: p.Keys, NextCursor: optStr(p.NextCursor)}, nil
}

// pageOptions passes the limit and cursor arguments of a listing on.
func pageOptions(a args) []state.ListOption {
	var opts []state.ListOption
	if a.has("limit") {
		opts = append(opts, state.WithLimit(int(a.int("limit"))))
	}
	if a.has("cursor") {
		opts = append(opts, state.WithCursor(a.str("cursor")))
	}
	return opts
}
