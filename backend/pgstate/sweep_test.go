package pgstate

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestOneSweeperAtATime holds the schema's sweep lock as another replica
// sweeping would: Sweep then returns at once having done nothing, instead
// of waiting; once the lock is free, Sweep removes what is due.
func TestOneSweeperAtATime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	now := time.UnixMilli(1_900_000_000_000)
	if _, err := d.Commit(ctx, &backend.Txn{NS: "ns", Now: now, Then: []backend.Op{
		{Kind: backend.OpPut, Key: "gone", TTL: time.Second, Time: now}}}); err != nil {
		t.Fatal(err)
	}
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", d.sweepLock()); err != nil {
		t.Fatal(err)
	}
	q := &backend.SweepQuery{Now: now.Add(time.Hour), Limit: 100}
	res, err := d.Sweep(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if res != (backend.SweepResult{}) {
		t.Errorf("Sweep while another process sweeps: %+v, want nothing done and nothing more", res)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err = d.Sweep(ctx, q)
	if err != nil || res.Records != 1 {
		t.Errorf("Sweep once the lock is free: %+v, %v; want the expired record removed", res, err)
	}
}

// TestHistoryStaysWithinItsCapUnderWrites runs writers and a store whose
// background sweeper runs every 50 ms with a cap of 300 events: the writers
// never fail or wait for the sweeper, history stays within the cap plus
// what was written between two sweeps, and once the writers stop, the next
// sweep leaves exactly the cap.
func TestHistoryStaysWithinItsCapUnderWrites(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	d := newTestDriver(t, ctx)
	const maxEvents = 300
	st, err := state.New(d, &state.Options{SweepInterval: 50 * time.Millisecond, HistoryMaxEvents: maxEvents})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var written, worst atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := st.Set(ctx, fmt.Sprintf("w%d/%d", w, i%20), i); err != nil {
					t.Errorf("a write while the sweeper runs: %v", err)
					return
				}
				written.Add(1)
			}
		})
	}
	// Sample the history's size while the writers run, for the record.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		h, err := st.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if h.Events > worst.Load() {
			worst.Store(h.Events)
		}
		time.Sleep(20 * time.Millisecond) // sampling interval, not synchronisation
	}
	close(stop)
	wg.Wait()
	t.Logf("%d writes; history peaked at %d events against a cap of %d", written.Load(), worst.Load(), maxEvents)
	if written.Load() < 2*maxEvents {
		t.Skipf("only %d writes in 3s: the machine is too busy for the cap to matter", written.Load())
	}
	// The background sweeper may be sweeping (from a snapshot taken before
	// the last writes) when this sweep starts: this one then returns at
	// once, and the next does the work.
	var h state.Health
	for range 20 {
		if _, err := st.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if h, err = st.Health(ctx); err != nil {
			t.Fatal(err)
		}
		if h.Events == maxEvents {
			break
		}
	}
	if h.Events != maxEvents {
		t.Errorf("history holds %d events after a sweep, want the cap, %d", h.Events, maxEvents)
	}
	if worst.Load() > maxEvents+written.Load()/4 {
		t.Errorf("history peaked at %d events of %d written: the sweeper did not keep it near its cap while writers ran", worst.Load(), written.Load())
	}
}
