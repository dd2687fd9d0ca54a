package pgstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// needParent is the claim function's answer when the run is a child whose
// fresh claim must also count on its parent, named in the answer's writer
// (see migrations/003_claim.sql).
const needParent = 7

// countClaimed is the record key of the counter of claimed runs.
var countClaimed = layout.StatusCount(layout.Claimed)

// ClaimRun implements backend.Claimer: one call of the claim function (see
// migrations/003_claim.sql), which reads the run (holding its claim),
// decides as state.Store.ClaimRun does, and writes the run, the counter of
// claimed runs when the status changes and the history event. A heartbeat
// (the holder claiming again) is the same one call.
func (d *Driver) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	err := d.enter(ctx)
	if err != nil {
		return backend.ClaimResult{}, err
	}
	agent, err := json.Marshal(q.AgentID)
	if err != nil {
		return backend.ClaimResult{}, fmt.Errorf("pgstate: claim: %w", err)
	}
	key := layout.Run(q.RunID)
	// The run's lock first, and the counter's only when the counter is
	// written: the order of Update, whose checkpoints and releases lock the
	// run to read it and the counters when they commit.
	runLock, countLock := d.lockKey(q.NS, key), d.lockKey(q.NS, countClaimed)
	var res backend.ClaimResult
	var outcome int32
	var nowMs int64
	var rec recordRow
	// A child's fresh claim also counts on its parent: the first call names
	// the parent (needParent) and the second brings its counter and lock.
	var parent *string
	var childKey []byte
	var childLock int64
	for {
		err = d.pool.QueryRow(ctx, d.q.claim, q.NS, nowArg(q.Now), d.nsLock(q.NS), runLock, countLock, []byte(key),
			[]byte(q.RunID), q.AgentID, string(agent), ttlMs(q.TTL), []byte(countClaimed), childLock, childKey, parent).
			Scan(&outcome, &nowMs, &res.Reclaimed, &rec.value, &rec.writer, &rec.rev, &rec.crev, &rec.upd, &rec.exp)
		if err == nil && outcome == needParent && rec.writer != nil {
			parent, childKey = rec.writer, []byte(layout.ChildCount(*rec.writer, layout.Claimed))
			childLock = d.lockKey(q.NS, string(childKey))
			continue
		}
		// A commit that locks the counter before the run (in sorted order)
		// may meet a claim that locked the run first: the database breaks
		// the wait by failing one side, which starts again.
		if !deadlocked(ctx, err) {
			break
		}
	}
	if err != nil {
		return backend.ClaimResult{}, d.fail(ctx, "claim", err)
	}
	res.Outcome, res.Now = backend.ClaimOutcome(outcome), timeOf(q.Now, nowMs)
	if res.Outcome < backend.ClaimNotFound || res.Outcome > backend.ClaimWaiting {
		return backend.ClaimResult{}, fmt.Errorf("pgstate: claim: unknown outcome %d", outcome)
	}
	if res.Outcome != backend.ClaimNotFound {
		res.Run = rec.record(key)
	}
	return res, nil
}
