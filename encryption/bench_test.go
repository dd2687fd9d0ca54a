package encryption_test

// The cost of encryption at rest on SQLite: the same Get and Set on one
// store with encryption and one without, in alternating rounds so that
// both see the same machine load, reported as ratios of wall time and of
// the process's CPU time (which other processes' load does not inflate):
//
//	go test -run '^$' -bench Encryption -benchtime 2s ./encryption/

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/benchvs"
)

const benchKeys = 2000

// benchStores returns a store with encryption and one without, each over
// a SQLite file of its own holding benchKeys entries.
func benchStores(b *testing.B) (enc, plain *state.Store) {
	b.Helper()
	ctx := context.Background()
	open := func(name string, e state.Encryption) *state.Store {
		d, err := sqlitestate.Open(ctx, filepath.Join(b.TempDir(), name), nil)
		if err != nil {
			b.Fatal(err)
		}
		st, err := state.New(d, &state.Options{SweepInterval: -1, Encryption: e})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = st.Close() })
		items := make([]state.Item, 0, 500)
		for i := range benchKeys {
			items = append(items, state.Item{Key: fmt.Sprintf("key-%05d", i), Value: map[string]any{"n": i, "text": "some agent state"}})
			if len(items) == cap(items) || i == benchKeys-1 {
				if _, err := st.SetMany(ctx, items); err != nil {
					b.Fatal(err)
				}
				items = items[:0]
			}
		}
		return st
	}
	return open("enc.db", mustKeyring(b, newKeyURL(b))), open("plain.db", nil)
}

func BenchmarkEncryption(b *testing.B) {
	enc, plain := benchStores(b)
	ctx := context.Background()
	val := json.RawMessage(`{"n":1,"text":"some agent state"}`)
	b.Run("Get", func(b *testing.B) {
		get := func(st *state.Store) func(int64) error {
			return func(i int64) error {
				_, err := st.Get(ctx, fmt.Sprintf("key-%05d", i%benchKeys))
				return err
			}
		}
		e, p := benchvs.Measure(b, 1, get(enc), get(plain), nil)
		b.ReportMetric(float64(e.Wall)/float64(p.Wall), "enc/plain")
		b.ReportMetric(float64(e.CPU)/float64(p.CPU), "cpu-enc/plain")
	})
	b.Run("Set", func(b *testing.B) {
		set := func(st *state.Store) func(int64) error {
			return func(i int64) error {
				_, err := st.Set(ctx, fmt.Sprintf("key-%05d", i%benchKeys), val)
				return err
			}
		}
		e, p := benchvs.Measure(b, 1, set(enc), set(plain), nil)
		b.ReportMetric(float64(e.Wall)/float64(p.Wall), "enc/plain")
		b.ReportMetric(float64(e.CPU)/float64(p.CPU), "cpu-enc/plain")
	})
}
