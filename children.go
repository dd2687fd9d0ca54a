package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Parent and child runs.
//
// A run created WithParent is a child of an open run. Every write that
// changes a child's status changes its parent's counters of children in
// the same commit (internal/layout), so Run.Children is exact however many
// children race. A join parent (WithJoin) is stored as StatusWaiting from
// its creation; the commit that finishes its last open child (done or
// failed) also rewrites the parent to StatusCreated, after which it is
// claimable like any fresh run: of racing aggregators exactly one claims
// it. A join parent with no children yet keeps waiting.
//
// Children created after the join released:
//
//   - while the parent is created (released but not claimed yet), the new
//     child sends it back to waiting in the same commit (history:
//     workflow.rejoin), so no aggregator starts while a child is open;
//   - once an aggregator claimed it (claimed or running), the parent takes
//     no more children: ErrParentFinished. Start another join parent for
//     another round.
//
// Creating all children before any of them can finish avoids a join that
// releases between two of them. A waiting parent can still be finished
// directly (CompleteRun, FailRun: abandoning the fan-out); its children
// are left as they are.

// errNeedFamily makes updateRun read a finishing child's parent too.
var errNeedFamily = errors.New("finishing a child run: read its parent too")

// familyKeys are the keys a finishing child of parent reads: the parent
// and its counters of open children.
func familyKeys(parent string) []string {
	keys := []string{layout.Run(parent)}
	for _, b := range layout.OpenBuckets {
		keys = append(keys, layout.ChildCount(parent, b))
	}
	return keys
}

// finishesChild reports whether txn, a write of run v made by runWrite
// (which puts the run first), finishes v and v has a parent.
func finishesChild(v *layout.RunValue, txn *backend.Txn) bool {
	if v.Parent == "" || !layout.Open(v.Status) || len(txn.Then) == 0 ||
		!strings.HasPrefix(txn.Then[0].Key, layout.RunPrefix) || txn.Then[0].Kind != backend.OpPut {
		return false
	}
	nv, err := layout.DecodeRun(txn.Then[0].Value)
	return err == nil && !layout.Open(nv.Status)
}

// joinOps adds to txn, which finishes a child of parent, the release of
// the parent when it is a waiting join parent and this is its last open
// child. recs are the records of familyKeys(parent), read with the child.
func joinOps(txn *backend.Txn, parent string, recs []backend.Record, now time.Time) error {
	if !recs[0].Live() {
		return nil // the parent is gone (a reset): nothing to release
	}
	pv, err := decodeRun(recs[0])
	if err != nil || pv.Status != layout.Waiting {
		return err
	}
	var open int64
	for _, r := range recs[1:] {
		n, err := countOf(r)
		if err != nil {
			return err
		}
		open += n
	}
	if open > 1 {
		return nil // other children are still open
	}
	ops, ev := moveParent(parent, pv, layout.Created, "workflow.join", "", now)
	txn.Then = append(txn.Then, ops...)
	txn.Events = append(txn.Events, ev)
	return nil
}

// moveParent returns the writes that move join parent pv to status (its
// release, or its return to waiting) and the history event op recording it.
func moveParent(parent string, pv *layout.RunValue, status, op, agent string, now time.Time) ([]backend.Op, backend.Event) {
	npv := *pv
	npv.Status = status
	npv.UpdatedAt = layout.Ms(now)
	return runWrite(parent, pv, &npv, now).Then, backend.Event{Key: parent, Op: op,
		Value: layout.EventOf(&npv, nil), Prev: layout.EventOf(pv, nil), Writer: agent}
}

// linkEvent is the value of a workflow.link event, recorded on the parent.
type linkEvent struct {
	Child string `json:"child_run_id"`
}

// linkOps returns the writes that add child to parent, whose run record
// is prec: the link event, and the parent's return to waiting when it is
// a released join parent nobody claimed yet.
func linkOps(parent string, prec backend.Record, child, agent string, now time.Time) ([]backend.Op, []backend.Event, error) {
	if !prec.Live() {
		return nil, nil, &ParentError{ParentID: parent}
	}
	pv, err := decodeRun(prec)
	if err != nil {
		return nil, nil, err
	}
	st := Status(pv.Status)
	if st.Finished() || pv.Join && (st == StatusClaimed || st == StatusRunning) {
		return nil, nil, &ParentError{ParentID: parent, Status: st}
	}
	link, _ := json.Marshal(linkEvent{Child: child})
	evs := []backend.Event{{Key: parent, Op: "workflow.link", Value: link, Writer: agent}}
	if !pv.Join || st == StatusWaiting {
		return nil, evs, nil
	}
	ops, ev := moveParent(parent, pv, layout.Waiting, "workflow.rejoin", agent, now)
	return ops, append(evs, ev), nil
}

// childCountKeys are the counters of id's children, in the order
// childrenOf reads them.
func childCountKeys(id string) []string {
	keys := make([]string, len(layout.Counters))
	for i, c := range layout.Counters {
		keys[i] = layout.ChildCount(id, c)
	}
	return keys
}

// childrenOf turns the records of childCountKeys into counts by status;
// nil when the run never had a child.
func childrenOf(recs []backend.Record) (map[Status]int64, error) {
	n := map[string]int64{}
	var total int64
	for i, b := range layout.Counters {
		c, err := countOf(recs[i])
		if err != nil {
			return nil, err
		}
		n[b] = c
		if b != layout.Claimed {
			total += c
		}
	}
	if total == 0 {
		return nil, nil
	}
	return map[Status]int64{
		StatusWaiting: n[layout.Waiting],
		StatusCreated: n[layout.Unstarted] - n[layout.Claimed],
		StatusClaimed: n[layout.Claimed],
		StatusRunning: n[layout.Running],
		StatusDone:    n[layout.Done],
		StatusFailed:  n[layout.Failed],
	}, nil
}

// idemValue is the stored value of an idempotency key.
type idemValue struct {
	RunID string `json:"run_id"`
}

// replayEvent is the value of a workflow.replay event.
type replayEvent struct {
	Key string `json:"idempotency_key"`
}

// createLinked creates a run that has a parent or an idempotency key (or
// both): one atomic read-modify-write of the parent and the key.
func (s *Store) createLinked(ctx context.Context, name string, tags map[string]string, o callOptions) (Run, error) {
	var keys []string
	if o.parent != "" {
		keys = append(keys, layout.Run(o.parent))
	}
	if o.has(optIdem) {
		keys = append(keys, layout.Idem(o.idem))
	}
	for {
		var out Run
		replay := ""
		res, err := s.update(ctx, keys, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
			replay = ""
			if o.has(optIdem) {
				if r := recs[len(recs)-1]; r.Live() {
					var iv idemValue
					if err := json.Unmarshal(r.Value, &iv); err != nil || iv.RunID == "" {
						return nil, fmt.Errorf("stored idempotency key %s is corrupt", r.Key)
					}
					replay = iv.RunID
					ev, _ := json.Marshal(replayEvent{Key: o.idem})
					return &backend.Txn{Events: []backend.Event{{Key: iv.RunID, Op: "workflow.replay", Value: ev, Writer: o.agent}}}, nil
				}
			}
			id := newRunID()
			v := newRunValue(name, tags, o, now)
			txn := createTxn(id, v, o.agent, now)
			if o.parent != "" {
				ops, evs, err := linkOps(o.parent, recs[0], id, o.agent, now)
				if err != nil {
					return nil, err
				}
				txn.Then = append(txn.Then, ops...)
				txn.Events = append(txn.Events, evs...)
			}
			if o.has(optIdem) {
				iv, _ := json.Marshal(idemValue{RunID: id})
				txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: layout.Idem(o.idem), Value: iv,
					TTL: s.c.opts.IdempotencyWindow, Time: now})
			}
			out = runOf(id, v, layout.Ms(now))
			return txn, nil
		})
		switch {
		case err != nil:
			return Run{}, err
		case !res.Committed:
			continue // a run with the drawn id exists (one in 2^48): draw another
		case replay == "":
			return out, nil
		}
		runs, err := s.loadRuns(ctx, []string{replay})
		if err != nil {
			return Run{ID: replay}, err
		}
		if runs[0] == nil {
			return Run{ID: replay}, fmt.Errorf("idempotency key %q names run %s, which is gone: %w", o.idem, replay, ErrNotFound)
		}
		r := *runs[0]
		r.Replayed = true
		return r, nil
	}
}
