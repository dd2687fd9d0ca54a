package migrate_test

import (
	"context"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/migrate"
	"github.com/statesidecar/state/backend/objstate"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/internal/storetest"
)

// Every built-in driver names its namespaces and raises its revisions.
var (
	_ interface {
		migrate.NamespaceLister
		migrate.RevisionRaiser
	} = (*memstate.Driver)(nil)
	_ interface {
		migrate.NamespaceLister
		migrate.RevisionRaiser
	} = (*sqlitestate.Driver)(nil)
	_ interface {
		migrate.NamespaceLister
		migrate.RevisionRaiser
	} = (*redisstate.Driver)(nil)
	_ interface {
		migrate.NamespaceLister
		migrate.RevisionRaiser
	} = (*pgstate.Driver)(nil)
	_ interface {
		migrate.NamespaceLister
		migrate.RevisionRaiser
	} = (*objstate.Driver)(nil)
)

// TestCopyKeepsFencesGrowingOnEveryTarget copies a store whose revisions
// are far ahead (as a Redis or PostgreSQL store's are: they follow the
// clock in microseconds) into each backend: memory, SQLite, Redis and
// PostgreSQL (when their URLs are set) and a directory. On every one, the
// fence of a lease taken over after the copy, and the version of an entry
// written after it, are above those the source handed out; and every
// namespace of the source is copied without naming them.
func TestCopyKeepsFencesGrowingOnEveryTarget(t *testing.T) {
	const ahead = 4_000_000_000_000_000 // above any microsecond clock of this century
	ctx := context.Background()
	src := memstate.New()
	if err := src.RaiseRevision(ctx, "default", ahead); err != nil {
		t.Fatal(err)
	}
	a := open(t, src)
	fence := fill(t, a)
	tenant, err := a.Namespace("tenant-b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tenant.Set(ctx, "only-here", "b"); err != nil {
		t.Fatal(err)
	}
	version := func(st *state.Store) int64 {
		e, err := st.Get(ctx, "k/aa")
		if err != nil {
			t.Fatal(err)
		}
		return e.Version
	}
	srcVersion := version(a)
	if fence < ahead || srcVersion < ahead {
		t.Fatalf("the source's fence %d and version %d must be ahead", fence, srcVersion)
	}

	check := func(t *testing.T, b *state.Store, rep migrate.Report) {
		is := is.New(t)
		is.Equal(len(rep.Namespaces), 2) // every namespace, unnamed
		for _, nr := range rep.Namespaces {
			is.True(nr.RevisionsAbove) // the target's revisions were raised
		}
		same(t, a, b)
		is.True(version(b) > srcVersion) // a copied entry's version grew
		// The lease's holder lets it go; another takes it: a new fence,
		// above every fence the source handed out.
		ok, err := b.ReleaseLease(ctx, "printer", "agent-2")
		is.NoErr(err)
		is.True(ok)
		l, err := b.TryAcquireLease(ctx, "printer", "agent-3", time.Minute)
		is.NoErr(err)
		is.True(l.Fence > fence) // a fence never goes back across a copy
		e, err := b.Set(ctx, "k/aa", "after")
		is.NoErr(err)
		is.True(e.Version > srcVersion) // nor does a version
		bt, err := b.Namespace("tenant-b")
		is.NoErr(err)
		got, err := bt.Get(ctx, "only-here")
		is.NoErr(err)
		is.Equal(string(got.Value), `"b"`)
	}
	storetest.Run(t, func(t *testing.T, be storetest.Backend) {
		be = storetest.New(t, be.Name)
		b := storetest.Open(t, be.URL, &state.Options{SweepInterval: -1})
		rep, err := migrate.Copy(ctx, src, b.Driver(), nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, b, rep)
	})
	t.Run("directory", func(t *testing.T) {
		dir, err := filestate.Open(ctx, t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := migrate.Copy(ctx, src, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, open(t, dir), rep)
	})
}
