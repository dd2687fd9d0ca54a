package backendtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// retentionDriverCases check backend.HistoryTrimmer.
func retentionDriverCases() []testCase[driverEnv] {
	return []testCase[driverEnv]{
		{"HistoryTrimmerKeepsTheNewestEvents", func(t *testing.T, e driverEnv) {
			tr, ok := e.d.(backend.HistoryTrimmer)
			if !ok {
				t.Skip("driver has no HistoryTrimmer")
			}
			is := is.New(t)
			other := driverEnv{d: e.d, ns: newNS()}
			for i := range 20 {
				e.commit(t, t0, &backend.Txn{Events: []backend.Event{{Key: fmt.Sprint("k", i%3), Op: "x"}}})
			}
			other.commit(t, t0, &backend.Txn{Events: []backend.Event{{Key: "k0", Op: "x"}}})
			ids := func(evs []backend.Event) []int64 {
				out := []int64{}
				for _, ev := range evs {
					out = append(out, ev.ID)
				}
				return out
			}
			all := ids(e.history(t, backend.HistoryQuery{}))
			res, err := tr.TrimHistory(context.Background(), &backend.TrimQuery{NS: e.ns, Keep: 5, Limit: 10})
			is.NoErr(err)
			is.Equal(res, backend.TrimResult{Events: 10, More: true}) // TrimHistory removes at most Limit events and says there are more
			res, err = tr.TrimHistory(context.Background(), &backend.TrimQuery{NS: e.ns, Keep: 5, Limit: 10})
			is.NoErr(err)
			is.Equal(res, backend.TrimResult{Events: 5})                    // and then the rest beyond Keep
			is.Equal(ids(e.history(t, backend.HistoryQuery{})), all[:5])    // keeping the newest events, ids unchanged
			is.Equal(len(e.history(t, backend.HistoryQuery{Key: "k0"})), 2) // the per-key history loses the removed events too
			res, err = tr.TrimHistory(context.Background(), &backend.TrimQuery{NS: e.ns, Keep: 5, Limit: 10})
			is.NoErr(err)
			is.Equal(res.Events, int64(0))                             // nothing more to remove
			is.Equal(len(other.history(t, backend.HistoryQuery{})), 1) // other namespaces are left alone
			is.Equal(e.count(t, t0).Events, int64(5))                  // Count agrees
			next := e.commit(t, t0, &backend.Txn{Events: []backend.Event{{Key: "k", Op: "x"}}})
			is.True(next.Committed)
			is.True(e.history(t, backend.HistoryQuery{Limit: 1})[0].ID > all[0]) // ids keep increasing after a trim
		}},
	}
}

// retentionCases check that a store keeps history within
// Options.HistoryMaxEvents as it is written, without sweeping.
func retentionCases() []testCase[storeEnv] {
	return []testCase[storeEnv]{
		{"HistoryStaysWithinItsLimitWithoutSweeping", func(t *testing.T, e storeEnv) {
			d := e.newDriver(t)
			if _, ok := d.(backend.HistoryTrimmer); !ok {
				t.Skip("driver has no HistoryTrimmer")
			}
			is := is.New(t)
			const limit = 100
			st, err := state.New(d, &state.Options{Clock: e.clk, SweepInterval: -1, HistoryMaxEvents: limit, Namespace: newNS()})
			is.NoErr(err)
			defer st.Close()
			r, err := st.CreateRun(ctx, "job", nil)
			is.NoErr(err)
			most := int64(0)
			for i := range 600 {
				switch i % 4 {
				case 0, 1:
					_, err = st.Set(ctx, fmt.Sprint("k", i%10), i)
				case 2:
					_, err = st.TryAcquireLease(ctx, "l", "A", time.Minute) // native lease paths count too
				case 3:
					_, err = st.ClaimRun(ctx, r.ID, "A") // and native claims
				}
				is.NoErr(err)
				if i%10 == 9 {
					h, err := st.Health(ctx)
					is.NoErr(err)
					most = max(most, h.Events)
				}
			}
			t.Logf("history count peaked at %d with HistoryMaxEvents %d", most, limit)
			is.True(most >= limit)         // the writes filled the history
			is.True(most <= limit+limit/4) // and it stayed within a small margin of its limit, with no sweep
		}},
	}
}

// SoakEnv names the variable that sets how long HistorySoak writes, as a Go
// duration ("3m"); without it the soak is short enough for the normal suite.
const SoakEnv = "STATE_TEST_SOAK"

// SoakDuration returns the duration SoakEnv sets, or short without it. A
// malformed value fails the test.
func SoakDuration(t *testing.T, short time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(SoakEnv)
	if v == "" {
		return short
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q is not a positive Go duration such as 3m", SoakEnv, v)
	}
	return d
}

// A SoakSample is one reading taken during HistorySoak.
type SoakSample struct {
	// At is how long the soak had run.
	At time.Duration
	// Writes is the number of writes acknowledged so far.
	Writes int64
	// Events is the store's history count.
	Events int64
	// Gauge is what the caller's gauge read (a file size, say), or 0.
	Gauge int64
}

// HistorySoak writes to st from several goroutines for d (keys, leases and
// sessions that are overwritten, so that only history would grow), reading
// the history count and gauge (when not nil) every sampleEvery, and fails
// when the history count ever exceeds st's history limit by more than a
// small margin. It returns the samples for the caller to check and report.
func HistorySoak(t *testing.T, st *state.Store, limit int64, d time.Duration, gauge func() int64) []SoakSample {
	t.Helper()
	const writers, sampleEvery = 4, 250 * time.Millisecond
	var samples []SoakSample
	var writes atomic.Int64
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var err error
			// Calls run under a context of their own: the soak's ending
			// must not fail a write in flight.
			cctx := context.Background()
			for i := 0; ctx.Err() == nil; i++ {
				switch i % 5 {
				case 0, 1, 2:
					_, err = st.Set(cctx, fmt.Sprintf("soak/%d/%d", w, i%200), map[string]any{"i": i, "pad": "0123456789abcdef0123456789abcdef"})
				case 3:
					_, err = st.TryAcquireLease(cctx, fmt.Sprintf("res-%d", i%20), fmt.Sprint("w", w), time.Minute)
					if errors.Is(err, state.ErrLeaseHeld) {
						err = nil
					}
				case 4:
					_, err = st.SetSession(cctx, fmt.Sprintf("s-%d-%d", w, i%20), map[string]int{"i": i})
				}
				if err != nil {
					errs <- err
					return
				}
				writes.Add(1)
			}
			errs <- nil
		}()
	}
	sample := func() {
		h, err := st.Health(context.Background())
		if err != nil {
			t.Errorf("health during the soak: %v", err)
			return
		}
		s := SoakSample{At: time.Since(start).Round(time.Millisecond), Writes: writes.Load(), Events: h.Events}
		if gauge != nil {
			s.Gauge = gauge()
		}
		samples = append(samples, s)
	}
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for running := writers; running > 0; {
		select {
		case err := <-errs:
			running--
			if err != nil {
				t.Errorf("write during the soak: %v", err)
				cancel()
			}
		case <-tick.C:
			sample()
		}
	}
	sample()
	margin := limit / 4
	most := int64(0)
	for _, s := range samples {
		most = max(most, s.Events)
	}
	if most > limit+margin {
		t.Errorf("history reached %d events with HistoryMaxEvents %d: it must stay within %d of the limit as it is written", most, limit, margin)
	}
	t.Logf("soak: %d writes in %v; history count peaked at %d (limit %d)", samples[len(samples)-1].Writes, d, most, limit)
	return samples
}
