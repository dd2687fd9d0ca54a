package state

import (
	"context"
	"runtime"

	"github.com/statesidecar/state/backend"
)

// sweepBatch bounds the records and events removed by one backend call, so a
// sweep holds the backend's write lock only briefly and callers interleave.
const sweepBatch = 500

// SweepResult reports what Sweep removed.
type SweepResult struct {
	// Records is the number of expired records removed.
	Records int64
	// Events is the number of history entries removed by retention.
	Events int64
}

// Sweep physically removes expired records (once they have been expired for
// Options.SweepGrace) and history entries beyond the retention limits, in
// every namespace, in small batches. The background sweeper calls it every
// Options.SweepInterval; call it directly to sweep at a moment of your
// choosing (tests do, with a fake clock). Expired records are invisible
// whether or not they have been swept. A backend that cannot sweep reports
// nothing removed.
func (s *Store) Sweep(ctx context.Context) (SweepResult, error) {
	res, err := s.sweep(ctx)
	return res, wrap("sweep", "", err)
}

func (s *Store) sweep(ctx context.Context) (SweepResult, error) {
	var total SweepResult
	if s.c.drv.sweeper == nil {
		return total, nil
	}
	o := s.c.opts
	for {
		done, err := s.enter()
		if err != nil {
			return total, err
		}
		_, drvNow := s.now()
		q := &backend.SweepQuery{Now: drvNow, Grace: o.SweepGrace, Limit: sweepBatch}
		if o.HistoryMaxAge > 0 {
			q.HistoryMaxAge = o.HistoryMaxAge
		}
		if o.HistoryMaxEvents > 0 {
			q.HistoryMaxEvents = o.HistoryMaxEvents
		}
		r, err := s.c.drv.Sweep(ctx, q)
		done()
		total.Records += r.Records
		total.Events += r.Events
		if err != nil || !r.More {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
		runtime.Gosched() // let callers waiting on the backend go first
	}
}
