package objstate_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/backendtest"
	"github.com/statesidecar/state/backend/objstate"
)

// split is one backend.Driver made of several drivers on one medium, each
// call going to the next in turn: standing for processes that share a
// store, it puts every case of the conformance suite to their caches,
// which must never show one process a state older than what another
// already acknowledged.
type split struct {
	ds   []*objstate.Driver
	next atomic.Int64
}

func (s *split) pick() *objstate.Driver { return s.ds[int(s.next.Add(1))%len(s.ds)] }

func (s *split) Name() string { return s.ds[0].Name() }
func (s *split) Get(ctx context.Context, ns, key string, now time.Time) (backend.Record, error) {
	return s.pick().Get(ctx, ns, key, now)
}
func (s *split) GetMany(ctx context.Context, q *backend.GetQuery) ([]backend.Record, error) {
	return s.pick().GetMany(ctx, q)
}
func (s *split) List(ctx context.Context, q *backend.ListQuery) ([]backend.Record, error) {
	return s.pick().List(ctx, q)
}
func (s *split) Count(ctx context.Context, q *backend.CountQuery) (backend.Counts, error) {
	return s.pick().Count(ctx, q)
}
func (s *split) Commit(ctx context.Context, txn *backend.Txn) (backend.Result, error) {
	return s.pick().Commit(ctx, txn)
}
func (s *split) History(ctx context.Context, q *backend.HistoryQuery) ([]backend.Event, error) {
	return s.pick().History(ctx, q)
}
func (s *split) Reset(ctx context.Context, q *backend.ResetQuery) (backend.ResetResult, error) {
	return s.pick().Reset(ctx, q)
}
func (s *split) Update(ctx context.Context, q *backend.GetQuery, fn func([]backend.Record, time.Time) (*backend.Txn, error)) (backend.Result, error) {
	return s.pick().Update(ctx, q, fn)
}
func (s *split) TrimHistory(ctx context.Context, q *backend.TrimQuery) (backend.TrimResult, error) {
	return s.pick().TrimHistory(ctx, q)
}
func (s *split) ServerTime(ctx context.Context) (time.Time, error) { return s.pick().ServerTime(ctx) }
func (s *split) ConsecutiveHistory() bool                          { return true }

// Sweep sweeps through every driver: each sweeps the namespaces it has
// read.
func (s *split) Sweep(ctx context.Context, q *backend.SweepQuery) (backend.SweepResult, error) {
	var all backend.SweepResult
	for _, d := range s.ds {
		r, err := d.Sweep(ctx, q)
		if err != nil {
			return all, err
		}
		all.Records += r.Records
		all.Events += r.Events
		all.More = all.More || r.More
	}
	return all, nil
}

func (s *split) Close() error {
	var errs []error
	for _, d := range s.ds {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

func TestConformanceAcrossDrivers(t *testing.T) {
	m := newMemMedium()
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		return &split{ds: []*objstate.Driver{open(t, m.handle()), open(t, m.handle()), open(t, m.handle())}}
	})
}

func TestConformanceWithFaults(t *testing.T) {
	m := newMemMedium()
	m.faultRate = 0.05
	backendtest.Run(t, func(t *testing.T) backend.Driver {
		return &split{ds: []*objstate.Driver{open(t, m.handle()), open(t, m.handle())}}
	})
}
