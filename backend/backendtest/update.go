package backendtest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

// errRefused is what the update functions of these cases return to refuse.
var errRefused = errors.New("refused by the update function")

func updateCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"UpdatePrivateWritesKeepValuesOutOfHistory", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			must(e.st.Set(ctx, "secret", "old words"))
			_, err := e.st.Update(ctx, []string{"secret"}, func([]state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "secret", Value: "new words", Private: true},
					{Key: "unread", Value: "other words", Private: true}}, nil
			})
			is.NoErr(err)
			got, err := e.st.Get(ctx, "secret")
			is.NoErr(err)
			is.Equal(string(got.Value), `"new words"`) // the entry holds the value
			_, err = e.st.Update(ctx, []string{"secret"}, func([]state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "secret", Delete: true, Private: true}}, nil
			})
			is.NoErr(err)
			evs, err := e.st.History(ctx, state.HistoryQuery{Limit: 10})
			is.NoErr(err)
			is.Equal(ops(evs), []string{"kv.delete", "kv.set", "kv.set", "kv.set"})
			is.Equal(evs[0].Prev, json.RawMessage(nil))   // a private delete records no previous value
			is.Equal(string(evs[1].Value), `{"size":13}`) // a private set records the value's size
			is.Equal(evs[1].Prev, json.RawMessage(nil))   // and no previous value, read or not
			is.Equal(string(evs[2].Value), `{"size":11}`)
			is.Equal(evs[2].Prev, json.RawMessage(nil))
			is.Equal(string(evs[3].Value), `"old words"`) // a plain Set is recorded as ever
		}},
		{"UpdateSeesEntriesAndAppliesEveryWrite", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			a := must(e.st.Set(ctx, "a", 1))
			must(e.st.Set(ctx, "b", 2))
			var seen []state.Entry
			out, err := e.st.Update(ctx, []string{"a", "b", "c"}, func(cur []state.Entry) ([]state.Write, error) {
				seen = cur
				return []state.Write{
					{Key: "a", Value: 10, AgentID: "w"},
					{Key: "b", Delete: true},
					{Key: "c", Value: json.RawMessage(`{"x": 1}`), TTL: time.Minute},
					{Key: "d", Value: "unread"},
				}, nil
			})
			is.NoErr(err)
			is.Equal(len(seen), 3)
			is.Equal(seen[0].Version, a.Version)     // the function sees the version of each key read
			is.Equal(string(seen[1].Value), "2")     // and its value
			is.True(!seen[2].Found())                // a missing key is not found
			is.Equal(len(out), 4)                    // one entry per write
			is.True(out[0].Version > a.Version)      // puts get a new version
			is.Equal(out[0].Version, out[2].Version) // one commit: one version for every put
			is.Equal(out[0].Version, out[3].Version)
			is.Equal(out[1].Version, int64(0)) // a delete reports no version
			is.True(out[2].ExpiresAt.Equal(t0.Add(time.Minute)))
			got := must(e.st.GetMany(ctx, []string{"a", "b", "c", "d"}))
			is.Equal(string(got[0].Value), "10")      // the put is stored
			is.Equal(got[0].AgentID, "w")             // with its writer
			is.True(!got[1].Found())                  // the delete is applied
			is.Equal(string(got[2].Value), `{"x":1}`) // JSON is compacted as Set does
			is.Equal(got[3].Version, out[3].Version)  // a key not read can be put
			e.clk.Advance(time.Minute)
			_, err = e.st.Get(ctx, "c")
			is.True(errors.Is(err, state.ErrNotFound)) // a write's TTL expires it
			hist := must(e.st.History(ctx, state.HistoryQuery{Key: "b"}))
			is.Equal(hist[0].Op, "kv.delete")   // a delete is recorded
			is.Equal(string(hist[0].Prev), "2") // with the previous value
			hist = must(e.st.History(ctx, state.HistoryQuery{Key: "a"}))
			is.Equal(string(hist[0].Prev), "1") // a put records the previous value
			hist = must(e.st.History(ctx, state.HistoryQuery{Key: "d"}))
			is.Equal(hist[0].Op, "kv.set") // so is a put of a key not read
		}},
		{"UpdateIsAllOrNothing", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			before := must(e.st.Set(ctx, "a", 1))
			_, err := e.st.Update(ctx, []string{"a"}, func(cur []state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "a", Value: 2}, {Key: "b", Value: func() {}}}, nil
			})
			is.True(errors.Is(err, state.ErrInvalid)) // a write that cannot be stored fails the update
			var fe *state.FieldError
			is.True(errors.As(err, &fe))
			is.Equal(fe.Field, "writes[1].value") // naming the write
			_, err = e.st.Update(ctx, []string{"a"}, func(cur []state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "a", Value: 3}}, errRefused
			})
			is.True(errors.Is(err, errRefused)) // the function's error is returned
			got := must(e.st.Get(ctx, "a"))
			is.Equal(got.Version, before.Version) // and nothing was written
			_, err = e.st.Get(ctx, "b")
			is.True(errors.Is(err, state.ErrNotFound))
			_, err = e.st.Update(ctx, []string{"a"}, func(cur []state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "z", Delete: true}}, nil
			})
			is.True(errors.Is(err, state.ErrInvalid)) // only keys read can be deleted
			_, err = e.st.Update(ctx, []string{"a", "a"}, func(cur []state.Entry) ([]state.Write, error) { return nil, nil })
			is.True(errors.Is(err, state.ErrInvalid)) // keys must be distinct
			_, err = e.st.Update(ctx, []string{"a"}, func(cur []state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "a", Value: 1}, {Key: "a", Value: 2}}, nil
			})
			is.True(errors.Is(err, state.ErrInvalid)) // written keys must be distinct
			is.Equal(must(e.st.Get(ctx, "a")).Version, before.Version)
		}},
		{"UpdateWithoutWritesWritesNothing", func(t *testing.T, e storeEnv) {
			is := is.New(t)
			out, err := e.st.Update(ctx, []string{"gone"}, func(cur []state.Entry) ([]state.Write, error) {
				return []state.Write{{Key: "gone", Delete: true}}, nil
			})
			is.NoErr(err)
			is.Equal(len(out), 1)
			hist := must(e.st.History(ctx, state.HistoryQuery{Key: "gone"}))
			is.Equal(len(hist), 0) // deleting a missing key records nothing
		}},
		{"RacingUpdatesAreAtomic", func(t *testing.T, e storeEnv) {
			// Writers move units from one account to another by
			// read-modify-write; a lost update or a torn commit breaks the
			// invariant that the two sum to the starting total.
			is := is.New(t)
			const writers, rounds = 8, 10
			must(e.st.SetMany(ctx, []state.Item{{Key: "from", Value: writers * rounds}, {Key: "to", Value: 0}}))
			var seq atomic.Int64
			starts, ends := make([]int64, writers), make([]int64, writers)
			start := make(chan struct{})
			var wg, midway sync.WaitGroup
			midway.Add(writers)
			for w := range writers {
				wg.Go(func() {
					<-start
					starts[w] = seq.Add(1)
					for r := range rounds {
						if r == 1 { // every writer is under way before any goes on
							midway.Done()
							midway.Wait()
						}
						_, err := e.st.Update(ctx, []string{"from", "to"}, func(cur []state.Entry) ([]state.Write, error) {
							var from, to int
							if err := cur[0].Decode(&from); err != nil {
								return nil, err
							}
							if err := cur[1].Decode(&to); err != nil {
								return nil, err
							}
							return []state.Write{{Key: "from", Value: from - 1}, {Key: "to", Value: to + 1}}, nil
						})
						if err != nil {
							t.Errorf("update: %v", err)
						}
					}
					ends[w] = seq.Add(1)
				})
			}
			close(start)
			wg.Wait()
			overlapped := false
			for i := range writers {
				for j := range writers {
					overlapped = overlapped || i != j && starts[i] < ends[j] && starts[j] < ends[i]
				}
			}
			is.True(overlapped) // the writers ran at the same time
			var from, to int
			got := must(e.st.GetMany(ctx, []string{"from", "to"}))
			is.NoErr(got[0].Decode(&from))
			is.NoErr(got[1].Decode(&to))
			is.Equal(fmt.Sprint(from, to), fmt.Sprint(0, writers*rounds)) // no racing update was lost or torn
		}},
	}
}
