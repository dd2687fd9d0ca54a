package state_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/statetest"
)

// TestTrimHistoryWhileOthersWriteKeepsEveryYoungEntry trims a namespace
// while writers append to it, from before the trim starts until after it
// ends: every entry recorded from the bound on stays, on memory and SQLite.
// (The conformance case runs TrimHistory alone on every backend.)
func TestTrimHistoryWhileOthersWriteKeepsEveryYoungEntry(t *testing.T) {
	ctx := context.Background()
	drivers := map[string]func(t *testing.T) backend.Driver{
		"memory": func(*testing.T) backend.Driver { return memstate.New() },
		"sqlite": func(t *testing.T) backend.Driver {
			d, err := sqlitestate.Open(ctx, t.TempDir()+"/s.db", nil)
			if err != nil {
				t.Fatal(err)
			}
			return d
		},
	}
	for name, open := range drivers {
		t.Run(name, func(t *testing.T) {
			clk := statetest.NewClock()
			st, err := state.New(open(t), &state.Options{Clock: clk, SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			const old, writers = 3000, 4
			for i := 0; i < old; i += 500 {
				items := make([]state.Item, 500)
				for j := range items {
					items[j] = state.Item{Key: fmt.Sprintf("old/%d", i+j), Value: i + j}
				}
				if _, err := st.SetMany(ctx, items); err != nil {
					t.Fatal(err)
				}
			}
			clk.Advance(time.Hour)
			cut := clk.Now()

			// The trim starts once every writer has written an entry, and the
			// writers stop once it has ended and each wrote one more: the two
			// overlap.
			var wg, begun sync.WaitGroup
			begun.Add(writers)
			start := make(chan struct{})
			var trimmed atomic.Bool
			var written atomic.Int64
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := 0; ; i++ {
						after := trimmed.Load()
						if _, err := st.Set(ctx, fmt.Sprintf("young/%d/%d", w, i), i); err != nil {
							t.Error(err)
							if i == 0 {
								begun.Done()
							}
							return
						}
						written.Add(1)
						if i == 0 {
							begun.Done()
						}
						if after {
							return
						}
					}
				}()
			}
			close(start)
			begun.Wait()
			removed, err := st.TrimHistory(ctx, cut)
			trimmed.Store(true)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			young, left := int64(0), 0
			before := int64(0)
			for {
				evs, err := st.History(ctx, state.HistoryQuery{Limit: 1000, Before: before})
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					if ev.Time.Before(cut) {
						left++
					} else {
						young++
					}
				}
				if len(evs) < 1000 {
					break
				}
				before = evs[len(evs)-1].ID
			}
			if young != written.Load() {
				t.Fatalf("%d entries from the bound on remain, want all %d written", young, written.Load())
			}
			if left > 64 || removed < old-64 {
				t.Fatalf("removed %d, %d older entries left; want at most 64 left", removed, left)
			}
			t.Logf("removed %d old entries while %d young ones were written", removed, written.Load())
		})
	}
}
