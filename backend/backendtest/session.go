package backendtest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

func sessionCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"SessionSaveReplacesRestoreReturns", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			s1, err := e.st.SetSession(ctx, "worker-A:pr-42", map[string]any{"llm_context": "x", "next": "security review"}, state.WithAgent("A"))
			is.NoErr(err)
			s2, err := e.st.SetSession(ctx, "worker-A:pr-42", json.RawMessage(`{"only": true}`))
			is.NoErr(err)
			is.True(s2.Version > s1.Version) // every save gets a greater version
			got, err := e.st.GetSession(ctx, "worker-A:pr-42")
			is.NoErr(err)
			is.Equal(string(got.Context), `{"only":true}`) // a save replaces the whole snapshot
			is.Equal(got.Version, s2.Version)
			_, err = e.st.GetSession(ctx, "nobody")
			is.True(errors.Is(err, state.ErrNotFound)) // restoring a missing session is not found
		}},
		{"SessionContextMustBeAnObject", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			for _, bad := range []any{json.RawMessage(`[1]`), "text", 3, nil, json.RawMessage(`{`)} {
				_, err := e.st.SetSession(ctx, "s", bad)
				var fe *state.FieldError
				is.True(errors.As(err, &fe))  // a context that is not a JSON object is rejected
				is.Equal(fe.Field, "context") // naming the field
			}
			_, err := e.st.GetSession(ctx, "s")
			is.True(errors.Is(err, state.ErrNotFound)) // a rejected save stores nothing
		}},
		{"SessionTTLVersionAndDelete", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			s1, err := e.st.SetSession(ctx, "s", map[string]int{"a": 1}, state.WithTTL(time.Minute))
			is.NoErr(err)
			is.True(s1.ExpiresAt.Equal(t0.Add(time.Minute)))
			_, err = e.st.SetSession(ctx, "s", map[string]int{"a": 2}, state.IfVersion(s1.Version+1))
			is.True(errors.Is(err, state.ErrConflict)) // IfVersion guards a save
			e.clk.Advance(time.Minute)
			_, err = e.st.GetSession(ctx, "s")
			is.True(errors.Is(err, state.ErrNotFound)) // a session expires after its TTL
			_, err = e.st.SetSession(ctx, "s", map[string]int{"a": 3})
			is.NoErr(err)
			ok, err := e.st.DeleteSession(ctx, "s")
			is.NoErr(err)
			is.True(ok) // deleting a live session reports true
			ok, err = e.st.DeleteSession(ctx, "s")
			is.NoErr(err)
			is.True(!ok) // deleting a missing session reports false
		}},
	}
}
