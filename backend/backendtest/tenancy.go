package backendtest

import (
	"context"
	"testing"

	"github.com/matryer/is"
	"github.com/statesidecar/state/backend"
)

// tenancyCases check that one namespace learns nothing of another's writes
// from the numbers it is given: revisions (versions and fences) and event
// ids count per namespace.
func tenancyCases() []testCase[driverEnv] {
	return []testCase[driverEnv]{
		{"RevisionsAndEventIDsArePerNamespace", func(t *testing.T, e driverEnv) {
			is := is.New(t)
			other := driverEnv{d: e.d, ns: newNS()}
			write := func(env driverEnv) (rev, id int64) {
				t.Helper()
				res := env.commit(t, t0, &backend.Txn{Then: []backend.Op{putOp("k", "v", 0)}, Events: []backend.Event{{Key: "k", Op: "x"}}})
				return res.Revision, env.history(t, backend.HistoryQuery{Limit: 1})[0].ID
			}
			r1, e1 := write(e)
			r2, e2 := write(e)
			for range 7 {
				write(other) // another tenant is busy
			}
			r3, e3 := write(e)
			is.Equal(r3-r2, r2-r1) // another namespace's writes must not move this namespace's revisions
			is.Equal(e3-e2, e2-e1) // nor its event ids
			_, err := e.d.Reset(context.Background(), &backend.ResetQuery{NS: e.ns})
			is.NoErr(err)
			r4, e4 := write(e)
			is.True(r4 > r3 && e4 > e3) // and both keep increasing across Reset
		}},
	}
}
