package pgstate_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/matryer/is"
	"github.com/statesidecar/state"
)

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
