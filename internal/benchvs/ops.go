package benchvs

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
)

// StoreOp readies st for b.N operations of the kind a VsRaw benchmark names
// and returns the operation: "Get" (one key), "Set" (over 1,000 keys),
// "Claim" (a fresh claim of a created run each), "Heartbeat" (the holder
// claiming again, over 1,000 runs) or "Acquire" (a new resource each).
func StoreOp(b *testing.B, st *state.Store, name string) func(int64) error {
	b.Helper()
	ctx := context.Background()
	switch name {
	case "Get":
		if _, err := st.Set(ctx, "k", map[string]int{"n": 1}); err != nil {
			b.Fatal(err)
		}
		return func(int64) error { _, err := st.Get(ctx, "k"); return err }
	case "Set":
		return func(i int64) error {
			_, err := st.Set(ctx, "k"+strconv.FormatInt(i%1000, 10), map[string]int{"n": 1})
			return err
		}
	case "Claim":
		ids := CreateRuns(b, st, b.N)
		return func(i int64) error { _, err := st.ClaimRun(ctx, ids[i], "agent"); return err }
	case "Heartbeat":
		ids := CreateRuns(b, st, 1000)
		for _, id := range ids {
			if _, err := st.ClaimRun(ctx, id, "agent"); err != nil {
				b.Fatal(err)
			}
		}
		return func(i int64) error { _, err := st.ClaimRun(ctx, ids[i%1000], "agent"); return err }
	case "Acquire":
		return func(i int64) error {
			_, err := st.TryAcquireLease(ctx, "res-"+strconv.FormatInt(i, 10), "holder", time.Minute)
			return err
		}
	}
	b.Fatalf("benchvs: no store operation %q", name)
	return nil
}

// CreateRuns creates n runs in st, 32 at a time, and returns their ids.
func CreateRuns(b *testing.B, st *state.Store, n int) []string {
	b.Helper()
	ids := make([]string, n)
	var next atomic.Int64
	var failed atomic.Value
	Parallel(32, int64(n), &next, func(i int64) error {
		r, err := st.CreateRun(context.Background(), "job", nil)
		ids[i] = r.ID
		return err
	}, &failed)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return ids
}

// VsRaw alternates b.N operations of raw and of store with g goroutines
// (Measure) and reports the store's ns/op, the raw one's (raw-ns/op) and
// the store's throughput as a fraction of raw (x-raw), then the CPU time
// per operation this process used for each (cpu-ns/op, raw-cpu-ns/op)
// and, when servers is not nil, the server processes it names
// (srv-ns/op, raw-srv-ns/op).
func VsRaw(b *testing.B, g int, raw, store func(int64) error, servers func() []int) {
	b.Helper()
	b.ReportAllocs()
	rawT, storeT := Measure(b, g, raw, store, servers)
	n := float64(b.N)
	b.ReportMetric(float64(storeT.Wall.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(rawT.Wall.Nanoseconds())/n, "raw-ns/op")
	b.ReportMetric(float64(rawT.Wall)/float64(storeT.Wall), "x-raw")
	b.ReportMetric(float64(storeT.CPU.Nanoseconds())/n, "cpu-ns/op")
	b.ReportMetric(float64(rawT.CPU.Nanoseconds())/n, "raw-cpu-ns/op")
	if servers != nil {
		b.ReportMetric(float64(storeT.Server.Nanoseconds())/n, "srv-ns/op")
		b.ReportMetric(float64(rawT.Server.Nanoseconds())/n, "raw-srv-ns/op")
	}
}
