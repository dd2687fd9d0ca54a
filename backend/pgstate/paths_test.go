package pgstate_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/statetest"
)

// TestNativeLeaseHistoryMatchesPortable runs one lease story through the
// driver's lease function and through package state's portable code, on
// one fake clock, with holder ids that JSON must escape, and compares the
// history each wrote byte for byte (fences aside: they are revisions, which
// differ between the two stores). The conformance suite checks the lease
// rules of both paths; this checks that the function encodes what it writes
// exactly as Go does.
func TestNativeLeaseHistoryMatchesPortable(t *testing.T) {
	is := is.New(t)
	clk := statetest.NewClock()
	open := func(hide bool) *state.Store {
		var d backend.Driver = newDriver(t)
		if hide {
			d = backendtest.HideOptional(d)
		}
		st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1})
		is.NoErr(err)
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	native, portable := open(false), open(true)
	odd := "a<b>&\"c\\d\n\te\u2028f\u2029g\x01é✓"
	story := func(st *state.Store) {
		t.Helper()
		steps := []func() error{
			func() error { _, err := st.TryAcquireLease(ctx, "res", odd, time.Second); return err },
			func() error { _, err := st.TryAcquireLease(ctx, "res", odd, time.Second); return err },
			func() error { _, err := st.RenewLease(ctx, "res", odd, 2*time.Second); return err },
			func() error { _, err := st.ReleaseLease(ctx, "res", odd); return err },
			func() error { _, err := st.TryAcquireLease(ctx, "res", "b", time.Second); return err },
			func() error { clk.Advance(time.Second); return nil },
			func() error { _, err := st.TryAcquireLease(ctx, "res", odd, time.Second); return err }, // takes over b's expired lease
			func() error { clk.Advance(time.Second); return nil },
			func() error { _, err := st.TryAcquireLease(ctx, "res", odd, time.Second); return err }, // its own expired lease
		}
		for i, s := range steps {
			if err := s(); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
	}
	base := clk.Now()
	story(native)
	clk.Set(base)
	story(portable)
	a, err := native.History(ctx, state.HistoryQuery{Limit: 100})
	is.NoErr(err)
	b, err := portable.History(ctx, state.HistoryQuery{Limit: 100})
	is.NoErr(err)
	is.Equal(len(a), len(b)) // both paths record the same number of events
	fence := regexp.MustCompile(`"fence":\d+`)
	mask := func(v []byte) string { return fence.ReplaceAllString(string(v), `"fence":F`) }
	for i := range a {
		is.Equal(a[i].Op, b[i].Op)                     // both paths record the same ops
		is.Equal(a[i].Key, b[i].Key)                   // on the same key
		is.Equal(a[i].AgentID, b[i].AgentID)           // by the same agent
		is.Equal(mask(a[i].Value), mask(b[i].Value))   // with the same value, byte for byte
		is.Equal(mask(a[i].Prev), mask(b[i].Prev))     // and the same previous value
		is.True(a[i].Time.Equal(b[i].Time))            // at the same time
		is.Equal(a[i].Value == nil, b[i].Value == nil) // a release has no value on both
	}
	l, err := native.GetLease(ctx, "res")
	is.NoErr(err)
	is.Equal(l.TTL, time.Second) // the native path stores the TTL as package state reads it
}

// TestRevisionsArePerNamespace checks that a namespace's revisions do not
// move with another namespace's writes, so that one tenant cannot count
// another's: each namespace draws from a sequence of its own, and fifty
// writes in one leave the other's sequence where it was.
func TestRevisionsArePerNamespace(t *testing.T) {
	is := is.New(t)
	d := newDriver(t)
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	is.NoErr(err)
	defer st.Close()
	other, err := st.Namespace("other")
	is.NoErr(err)
	_, err = st.Set(ctx, "k", 1)
	is.NoErr(err)
	_, err = other.Set(ctx, "k", 1)
	is.NoErr(err)
	last := func(ns string) int64 {
		var v int64
		err := d.Pool().QueryRow(ctx, `SELECT pg_sequence_last_value(seq) FROM `+pgx.Identifier{d.Schema()}.Sanitize()+
			`.namespaces WHERE ns = $1`, ns).Scan(&v)
		is.NoErr(err)
		return v
	}
	before := last("default")
	for i := range 50 {
		_, err := other.Set(ctx, "k", i)
		is.NoErr(err)
	}
	is.Equal(last("default"), before) // another namespace's writes leave this namespace's revisions alone
	var n int
	is.NoErr(d.Pool().QueryRow(ctx, `SELECT count(DISTINCT seq) FROM `+pgx.Identifier{d.Schema()}.Sanitize()+`.namespaces`).Scan(&n))
	is.Equal(n, 2) // one sequence per namespace
	e, err := st.Set(ctx, "k", 2)
	is.NoErr(err)
	is.True(e.Version > before) // and they go on from where they were
}
