package objstate_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

// TestSweepDeletesOnlyOldOrphans: a sweep deletes the segments and
// snapshot parts that no head names once they are older than the grace
// (those of writers that crashed or lost the race to the head), and keeps
// those the head names and the young ones (a writer may be about to name
// them).
func TestSweepDeletesOnlyOldOrphans(t *testing.T) {
	m := newMemMedium()
	d := open(t, m.handle())
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 200 { // enough for segments, merges and a snapshot
		_, err := d.Commit(ctx, &backend.Txn{NS: "n", Now: t0, Then: []backend.Op{{Kind: backend.OpPut,
			Key: "k" + strings.Repeat("x", i%7), Value: []byte(strings.Repeat("v", 200)), Time: t0}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	old, young := time.Now().Add(-2*time.Hour), time.Now()
	m.mu.Lock()
	for _, k := range []string{"ns/n/seg/000000000001-000000000002-dead0001.json", "ns/n/snap/000000000009-dead0002/part-00000.jsonl"} {
		m.objs[k] = memObj{data: []byte("orphan"), tag: "o", mod: old}
	}
	m.objs["ns/n/seg/000000000003-000000000004-young001.json"] = memObj{data: []byte("young"), tag: "y", mod: young}
	m.mu.Unlock()

	if _, err := d.Sweep(ctx, &backend.SweepQuery{Now: t0, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	got := m.keys("ns/n/")
	for _, k := range []string{"ns/n/seg/000000000001-000000000002-dead0001.json", "ns/n/snap/000000000009-dead0002/part-00000.jsonl"} {
		if slices.Contains(got, k) {
			t.Errorf("the old orphan %s was kept", k)
		}
	}
	if !slices.Contains(got, "ns/n/seg/000000000003-000000000004-young001.json") {
		t.Error("a young orphan was deleted: a writer may be about to name it")
	}
	// Everything the head names is still there: a fresh driver reads it
	// all back.
	d2 := open(t, m.handle())
	for i := range 7 {
		r, err := d2.Get(ctx, "n", "k"+strings.Repeat("x", i), t0)
		if err != nil || len(r.Value) != 200 {
			t.Fatalf("after the sweep a fresh driver reads %v, %v", r, err)
		}
	}
}
