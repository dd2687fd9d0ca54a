package migrate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/migrate"
	"github.com/statesidecar/state/backend/sqlitestate"
)

// fill writes a little of everything into st: entries (one with a TTL),
// runs in several states, a lease, a session, and their history.
func fill(t *testing.T, st *state.Store) (fence int64) {
	is := is.New(t)
	ctx := context.Background()
	for i := range 30 {
		_, err := st.Set(ctx, "k/"+string(rune('a'+i%26))+string(rune('a'+i/26)), i)
		is.NoErr(err)
	}
	_, err := st.Set(ctx, "ttl", "soon", state.WithTTL(time.Hour))
	is.NoErr(err)
	r1, err := st.CreateRun(ctx, "job", map[string]string{"team": "a"})
	is.NoErr(err)
	_, err = st.CreateRun(ctx, "job", nil)
	is.NoErr(err)
	_, err = st.ClaimRun(ctx, r1.ID, "agent-1")
	is.NoErr(err)
	l, err := st.TryAcquireLease(ctx, "printer", "agent-2", time.Hour)
	is.NoErr(err)
	_, err = st.SetSession(ctx, "s1", map[string]any{"step": 3})
	is.NoErr(err)
	return l.Fence
}

func open(t *testing.T, d backend.Driver) *state.Store {
	t.Helper()
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// same checks that b holds what a holds, as package state reads it.
func same(t *testing.T, a, b *state.Store) {
	is := is.New(t)
	ctx := context.Background()
	pa, err := a.List(ctx, "", state.WithLimit(100))
	is.NoErr(err)
	pb, err := b.List(ctx, "", state.WithLimit(100))
	is.NoErr(err)
	is.Equal(pa.Keys, pb.Keys) // every entry is copied
	for _, k := range pa.Keys {
		ea, err := a.Get(ctx, k)
		is.NoErr(err)
		eb, err := b.Get(ctx, k)
		is.NoErr(err)
		is.Equal(string(ea.Value), string(eb.Value))
		is.Equal(ea.AgentID, eb.AgentID)
		is.True(ea.UpdatedAt.Equal(eb.UpdatedAt)) // update times are kept
	}
	ea, _ := a.Get(ctx, "ttl")
	eb, err := b.Get(ctx, "ttl")
	is.NoErr(err)
	is.True(ea.ExpiresAt.Equal(eb.ExpiresAt)) // lifetimes are kept
	ra, err := a.ListRuns(ctx, state.WithLimit(10))
	is.NoErr(err)
	rb, err := b.ListRuns(ctx, state.WithLimit(10))
	is.NoErr(err)
	is.Equal(len(ra.Runs), len(rb.Runs))
	for i := range ra.Runs {
		is.Equal(ra.Runs[i].ID, rb.Runs[i].ID)
		is.Equal(ra.Runs[i].Status, rb.Runs[i].Status)
		is.Equal(ra.Runs[i].AgentID, rb.Runs[i].AgentID) // claims are kept
	}
	la, _ := a.GetLease(ctx, "printer")
	lb, err := b.GetLease(ctx, "printer")
	is.NoErr(err)
	is.Equal(la.Holder, lb.Holder)
	ha, err := a.History(ctx, state.HistoryQuery{Limit: 1000})
	is.NoErr(err)
	hb, err := b.History(ctx, state.HistoryQuery{Limit: 1000})
	is.NoErr(err)
	is.Equal(len(ha), len(hb)) // history is kept
	for i := range ha {
		is.Equal(ha[i].Op, hb[i].Op)
		is.Equal(ha[i].Key, hb[i].Key)
		is.Equal(string(ha[i].Value), string(hb[i].Value))
		is.True(ha[i].Time.Equal(hb[i].Time))
	}
}

// TestRoundTripThroughADirectoryKeepsEverything copies SQLite to a
// directory and back to memory, and checks each copy against the
// original; the directory's fences start above the source's.
func TestRoundTripThroughADirectoryKeepsEverything(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	src, err := sqlitestate.Open(ctx, t.TempDir()+"/src.db", nil)
	is.NoErr(err)
	a := open(t, src)
	fence := fill(t, a)

	dir, err := filestate.Open(ctx, t.TempDir(), nil)
	is.NoErr(err)
	rep, err := migrate.Copy(ctx, src, dir, nil)
	is.NoErr(err)
	is.Equal(len(rep.Namespaces), 1)
	is.True(rep.Namespaces[0].RevisionsAbove) // a directory raises its revisions
	b := open(t, dir)
	same(t, a, b)
	lb, _ := b.GetLease(ctx, "printer")
	is.True(lb.Fence > fence) // a fence only grows across the copy

	mem := memstate.New()
	rep, err = migrate.Copy(ctx, dir, mem, nil)
	is.NoErr(err)
	is.Equal(rep.Namespaces[0].Namespace, "default") // every namespace the directory holds
	same(t, a, open(t, mem))
}

func TestCopyRefusesATargetThatHoldsData(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	src, dst := memstate.New(), memstate.New()
	fill(t, open(t, src))
	_, err := open(t, dst).Set(ctx, "mine", 1)
	is.NoErr(err)
	_, err = migrate.Copy(ctx, src, dst, nil)
	is.True(errors.Is(err, migrate.ErrNotEmpty)) // a copy never mixes two stores
}
