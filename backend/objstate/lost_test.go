package objstate_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

// TestAnUpdatesLastCallIsTheOneCommitted: package state's Update
// functions keep what their last call computed (a run id drawn at random,
// say) and take the commit to be that call's. With writes whose answers
// are lost (a third of the requests fail, half of the failed writes having
// landed), the driver must never build the group again while a write of
// it may still land, or an earlier call's Txn could be committed while the
// caller keeps the last call's.
func TestAnUpdatesLastCallIsTheOneCommitted(t *testing.T) {
	m := newMemMedium()
	m.faultRate = 0.3
	d := open(t, m.handle())
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 {
		var last string
		q := &backend.GetQuery{NS: "n", Keys: []string{"k"}, Now: t0}
		res, err := d.Update(ctx, q, func([]backend.Record, time.Time) (*backend.Txn, error) {
			last = rand.Text()
			return &backend.Txn{Then: []backend.Op{{Kind: backend.OpPut, Key: "k", Value: []byte(last), Time: t0}}}, nil
		})
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		r, err := d.Get(ctx, "n", "k", t0)
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
		if string(r.Value) != last || r.Revision != res.Revision {
			t.Fatalf("update %d committed %q at revision %d; its last call returned %q, revision %d reported",
				i, r.Value, r.Revision, last, res.Revision)
		}
	}
}
