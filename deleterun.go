package state

import (
	"context"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// deleteBatch bounds the step outputs one commit of DeleteRun removes.
const deleteBatch = sweepBatch

// DeleteRun removes the finished run id (done or failed) and everything
// stored with it: its step outputs, its index entries and its place in the
// status counters (its parent's too, for a child). It reports whether it
// removed a run: false, with no error, when there was none to remove. It
// honours WithAgent (recorded in history as the deleter).
//
// Runs are kept until deleted: the store has no retention of its own for
// them, so an application that creates runs without end (one per request,
// say) deletes them once it no longer needs what they record. An open run
// (created, claimed, running or waiting) is refused with an error matching
// ErrNotFinished: finish it first (FailRun). A run that has children is
// refused with an error matching ErrHasChildren: delete the children first.
//
// The history event of the deletion, "workflow.delete", records the run's
// last summary as its previous value; the run's earlier events stay in
// history until its retention (Options.HistoryMaxAge, HistoryMaxEvents)
// removes them. A run with more than a few hundred step outputs is removed
// in several commits, its outputs first: a reader may then see some of
// them gone before the run is. A CreateRun replaying the idempotency key
// that made the run (WithIdempotencyKey, within Options.IdempotencyWindow)
// fails with an error matching ErrNotFound rather than create it again.
func (s *Store) DeleteRun(ctx context.Context, id string, opts ...DeleteRunOption) (bool, error) {
	ok, err := s.deleteRun(ctx, id, collect(opts))
	return ok, wrap("workflow.delete", id, err)
}

func (s *Store) deleteRun(ctx context.Context, id string, o callOptions) (bool, error) {
	if err := s.checkRunID(id); err != nil {
		return false, err
	}
	if err := checkOptionalID("agent_id", o.agent, s.c.opts.Limits.MaxIDBytes); err != nil {
		return false, err
	}
	done, err := s.enter()
	if err != nil {
		return false, err
	}
	defer done()
	// A finished run takes no more outputs, so once the run is known to be
	// finished its outputs can be listed before the commit that removes it.
	runs, err := s.loadRuns(ctx, []string{id})
	if err != nil {
		return false, err
	}
	if runs[0] == nil {
		return false, nil
	}
	if !runs[0].Status.Finished() {
		return false, ErrNotFinished
	}
	outputs, err := s.outputKeys(ctx, id)
	if err != nil {
		return false, err
	}
	for len(outputs) > deleteBatch {
		txn := &backend.Txn{}
		for _, k := range outputs[len(outputs)-deleteBatch:] {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: k})
		}
		if _, err := s.commit(ctx, txn); err != nil {
			return false, err
		}
		outputs = outputs[:len(outputs)-deleteBatch]
	}
	deleted := false
	_, err = s.update(ctx, append([]string{layout.Run(id)}, childCountKeys(id)...), func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		deleted = false
		if !recs[0].Live() {
			return nil, nil // deleted meanwhile
		}
		v, err := decodeRun(recs[0])
		if err != nil {
			return nil, err
		}
		if st := Status(v.Status); !st.Finished() {
			return nil, ErrNotFinished
		}
		kids, err := childrenOf(recs[1:])
		if err != nil {
			return nil, err
		}
		if len(kids) > 0 {
			return nil, ErrHasChildren
		}
		txn := &backend.Txn{Then: []backend.Op{{Kind: backend.OpDelete, Key: layout.Run(id)}}}
		for _, k := range layout.IndexKeys(id, v) {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: k})
		}
		for _, k := range outputs {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: k})
		}
		txn.Then = append(txn.Then, countOps(v, v.Status, "", now)...)
		txn.Events = []backend.Event{{Key: id, Op: "workflow.delete", Prev: layout.EventOf(v, nil), Writer: o.agent}}
		deleted = true
		return txn, nil
	})
	if err != nil {
		return false, err
	}
	return deleted, nil
}

// outputKeys lists the keys of run id's step outputs, in ascending order.
func (s *Store) outputKeys(ctx context.Context, id string) ([]string, error) {
	var keys []string
	prefix, after := layout.Outputs(id), ""
	for {
		_, now := s.now()
		recs, err := s.c.drv.List(ctx, &backend.ListQuery{NS: s.ns, Prefix: prefix, After: after, Limit: deleteBatch, Now: now, KeysOnly: true})
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			keys = append(keys, r.Key)
		}
		if len(recs) < deleteBatch {
			return keys, nil
		}
		after = recs[len(recs)-1].Key
	}
}
