package backendtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

var ctx = context.Background()

func compact(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		panic(err)
	}
	return b.String()
}

func kvCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"SetRoundTripsEveryKindOfJSONValue", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			values := []string{`{"a": 1, "b": [true, false, null]}`, `[1, "two", 3.5]`, `"text with <html> & ünïcödé"`,
				`42`, `-0.5e-300`, `true`, `false`, `null`, `12345678901234567890123456789`, `{}`, `[]`, `""`,
				`{"big": 9007199254740993, "neg": -9223372036854775809}`}
			for _, v := range values {
				_, err := e.st.Set(ctx, "v", json.RawMessage(v))
				is.NoErr(err)
				got, err := e.st.Get(ctx, "v")
				is.NoErr(err)
				is.Equal(string(got.Value), compact(v)) // a JSON value must read back as the same JSON, every digit kept
			}
			_, err := e.st.Set(ctx, "go", map[string]any{"n": 1, "s": "x"})
			is.NoErr(err)
			got, _ := e.st.Get(ctx, "go")
			is.Equal(string(got.Value), `{"n":1,"s":"x"}`) // Go values are stored as their JSON encoding
		}},
		{"SetReturnsVersionsWriterAndTimes", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			e1, err := e.st.Set(ctx, "k", 1, state.WithAgent("a1"), state.WithTTL(time.Minute))
			is.NoErr(err)
			is.True(e1.Version > 0)                          // Set returns the new version
			is.Equal(e1.AgentID, "a1")                       // Set returns the writer
			is.True(e1.UpdatedAt.Equal(t0))                  // UpdatedAt is the store's now
			is.True(e1.ExpiresAt.Equal(t0.Add(time.Minute))) // ExpiresAt is now + TTL
			e.clk.Advance(time.Second)
			e2, err := e.st.Set(ctx, "k", 2)
			is.NoErr(err)
			is.True(e2.Version > e1.Version) // every write gets a greater version
			got, err := e.st.Get(ctx, "k")
			is.NoErr(err)
			is.Equal(got.Version, e2.Version)                 // Get returns the version of the last write
			is.Equal(got.AgentID, "")                         // Get returns the writer of the last write
			is.True(got.UpdatedAt.Equal(t0.Add(time.Second))) // Get returns when it was written
			is.True(got.ExpiresAt.IsZero())                   // a Set without TTL clears an earlier TTL
			e.clk.Advance(time.Hour)
			_, err = e.st.Get(ctx, "k")
			is.NoErr(err) // an entry without TTL does not expire
		}},
		{"TTLHasMillisecondPrecision", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			_, err := e.st.Set(ctx, "k", "v", state.WithTTL(1500*time.Millisecond))
			is.NoErr(err)
			e.clk.Advance(1499 * time.Millisecond)
			ok, err := e.st.Exists(ctx, "k")
			is.NoErr(err)
			is.True(ok) // an entry is live 1ms before its TTL ends
			e.clk.Advance(time.Millisecond)
			_, err = e.st.Get(ctx, "k")
			is.True(errors.Is(err, state.ErrNotFound)) // an entry is gone exactly when its TTL ends
			ok, _ = e.st.Exists(ctx, "k")
			is.True(!ok) // an expired entry does not exist
		}},
		{"IfVersionIsCompareAndSet", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			e1, err := e.st.Set(ctx, "k", "a", state.IfVersion(0))
			is.NoErr(err) // IfVersion(0) writes an absent key
			_, err = e.st.Set(ctx, "k", "b", state.IfVersion(0))
			var ce *state.ConflictError
			is.True(errors.As(err, &ce))     // IfVersion(0) on a present key is a conflict
			is.Equal(ce.Current, e1.Version) // the conflict names the current version
			is.True(errors.Is(err, state.ErrConflict))
			_, err = e.st.Set(ctx, "k", "c", state.IfVersion(e1.Version+1000))
			is.True(errors.As(err, &ce) && ce.Current == e1.Version) // a wrong version is a conflict naming the current one
			got, _ := e.st.Get(ctx, "k")
			is.Equal(string(got.Value), `"a"`) // a failed compare-and-set changes nothing
			e2, err := e.st.Set(ctx, "k", "d", state.IfVersion(e1.Version), state.WithTTL(time.Second))
			is.NoErr(err) // the current version writes
			is.True(e2.Version > e1.Version)
			e.clk.Advance(time.Second)
			_, err = e.st.Set(ctx, "k", "e", state.IfVersion(0))
			is.NoErr(err) // an expired key counts as absent for IfVersion(0)
		}},
		{"DeleteReportsWhetherALiveEntryWentAway", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			e1, _ := e.st.Set(ctx, "k", 1)
			_, err := e.st.Delete(ctx, "k", state.IfVersion(e1.Version+1))
			is.True(errors.Is(err, state.ErrConflict)) // Delete with a wrong version is a conflict
			ok, err := e.st.Delete(ctx, "k", state.IfVersion(e1.Version))
			is.NoErr(err)
			is.True(ok) // Delete of a live entry reports true
			ok, err = e.st.Delete(ctx, "k")
			is.NoErr(err)
			is.True(!ok) // Delete of a missing entry reports false
			_, _ = e.st.Set(ctx, "t", 1, state.WithTTL(time.Second))
			e.clk.Advance(time.Second)
			ok, err = e.st.Delete(ctx, "t")
			is.NoErr(err)
			is.True(!ok) // Delete of an expired entry reports false: it was not live
		}},
		{"ListIsLiteralCaseSensitiveAndPaged", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			for _, k := range []string{"fact_1", "fact_2", "FACT_3", "fact%", "factX", "fact_9"} {
				_, err := e.st.Set(ctx, k, 1)
				is.NoErr(err)
			}
			_, _ = e.st.Set(ctx, "fact_gone", 1, state.WithTTL(time.Second))
			e.clk.Advance(time.Second)
			p, err := e.st.List(ctx, "fact_")
			is.NoErr(err)
			is.Equal(p.Keys, []string{"fact_1", "fact_2", "fact_9"}) // the prefix is literal and case-sensitive; expired keys are hidden
			is.Equal(p.NextCursor, "")                               // a complete listing has no cursor
			var all []string
			cursor := ""
			for {
				p, err := e.st.List(ctx, "", state.WithLimit(2), state.WithCursor(cursor))
				is.NoErr(err)
				is.True(len(p.Keys) <= 2) // WithLimit bounds the page
				all = append(all, p.Keys...)
				if p.NextCursor == "" {
					break
				}
				cursor = p.NextCursor
			}
			is.Equal(all, []string{"FACT_3", "fact%", "factX", "fact_1", "fact_2", "fact_9"}) // pages visit every key once, in byte order
		}},
		{"SetManyIsAllOrNothing", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			es, err := e.st.SetMany(ctx, []state.Item{{Key: "a", Value: 1}, {Key: "b", Value: 2}}, state.WithAgent("w"))
			is.NoErr(err)
			is.Equal(len(es), 2)
			is.Equal(es[0].Version, es[1].Version) // a batch is one atomic write
			_, err = e.st.SetMany(ctx, []state.Item{{Key: "c", Value: 3}, {Key: "", Value: 4}})
			is.True(errors.Is(err, state.ErrInvalid)) // one bad item rejects the batch
			ok, _ := e.st.Exists(ctx, "c")
			is.True(!ok) // a rejected batch stores nothing
			got, err := e.st.GetMany(ctx, []string{"b", "zz", "a"})
			is.NoErr(err)
			is.Equal(string(got[0].Value), "2") // GetMany keeps the order of the keys
			is.True(!got[1].Found())            // a missing key is not Found
			is.Equal(got[2].AgentID, "w")
		}},
		{"StateToolHasTheSevenOperations", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			tool := e.st.StateTool()
			is.NoErr(tool.Store(ctx, "a", json.RawMessage(`{"x":1}`)))
			is.NoErr(tool.BatchStore(ctx, []state.KeyValue{{Key: "b", Value: json.RawMessage(`2`)}, {Key: "c", Value: json.RawMessage(`null`)}}))
			v, err := tool.Retrieve(ctx, "a")
			is.NoErr(err)
			is.Equal(string(v), `{"x":1}`) // retrieve returns the stored value
			v, err = tool.Retrieve(ctx, "missing")
			is.NoErr(err)
			is.Equal(v, json.RawMessage(nil)) // retrieve of a missing key is nil, not an error
			ok, err := tool.Exists(ctx, "c")
			is.NoErr(err)
			is.True(ok) // a stored null exists
			keys, err := tool.List(ctx, "")
			is.NoErr(err)
			is.Equal(keys, []string{"a", "b", "c"})
			vs, err := tool.BatchRetrieve(ctx, []string{"c", "nope", "b"})
			is.NoErr(err)
			is.Equal(string(vs[0]), "null") // a stored null reads back as null
			is.Equal(vs[1], json.RawMessage(nil))
			is.Equal(string(vs[2]), "2")
			is.NoErr(tool.Delete(ctx, "a"))
			is.NoErr(tool.Delete(ctx, "a")) // deleting a missing key is not an error
			ok, _ = tool.Exists(ctx, "a")
			is.True(!ok)
		}},
	}
}
