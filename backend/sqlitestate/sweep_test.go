package sqlitestate_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/statetest"
)

// usedPages counts the database pages holding data (not free ones).
func usedPages(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_query_only=1")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages, free int64
	if err := db.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA freelist_count").Scan(&free); err != nil {
		t.Fatal(err)
	}
	return pages - free
}

func TestFileDoesNotGrowWithDeadKeys(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ttl.db")
	d, err := sqlitestate.Open(ctx, path, nil)
	is.NoErr(err)
	clk := statetest.NewClock()
	st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1, HistoryMaxEvents: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	var after []int64
	var live int64 // pages used while a round's entries are live
	for round := range 5 {
		items := make([]state.Item, state.DefaultMaxBatch)
		for i := range items {
			items[i] = state.Item{Key: fmt.Sprintf("session/%d/%d", round, i), Value: map[string]string{"blob": "some context that expires"}}
		}
		_, err := st.SetMany(ctx, items, state.WithTTL(time.Second))
		is.NoErr(err)
		if round == 0 {
			live = usedPages(t, path)
		}
		clk.Advance(time.Second + state.DefaultSweepGrace)
		res, err := st.Sweep(ctx)
		is.NoErr(err)
		is.Equal(res.Records, int64(state.DefaultMaxBatch)) // every expired entry is removed
		after = append(after, usedPages(t, path))
	}
	h, err := st.Health(ctx)
	is.NoErr(err)
	is.Equal(h.Keys, int64(0))
	is.True(h.Events <= 100) // history is trimmed to its limit
	t.Logf("pages in use with %d live entries: %d; after each round's sweep: %v", state.DefaultMaxBatch, live, after)
	for _, n := range after {
		is.True(n < live/2)      // sweeping frees the pages of dead keys for reuse
		is.True(n <= after[0]+2) // so the used pages do not grow round after round
	}
}
