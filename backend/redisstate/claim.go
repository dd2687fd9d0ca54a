package redisstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// ClaimRun implements backend.Claimer: one script that reads the run (which
// holds its claim), decides as state.Store.ClaimRun does, and writes the
// run, the counter of claimed runs when the status changes and the history
// event (lua/claim.lua).
func (d *Driver) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	if err := d.enter(ctx); err != nil {
		return backend.ClaimResult{}, err
	}
	if err := d.touch(ctx, q.NS); err != nil {
		return backend.ClaimResult{}, err
	}
	agent, err := json.Marshal(q.AgentID)
	if err != nil {
		return backend.ClaimResult{}, fmt.Errorf("redisstate: claim: %w", err)
	}
	v, err := claimScript.Run(ctx, d.rdb, []string{d.base(q.NS)}, nowArg(q.Now), q.RunID, q.AgentID,
		ttlMs(q.TTL), layout.Run(q.RunID), agent, layout.StatusCount(layout.Claimed), layout.ChildCounts, layout.Claimed).Result()
	if err != nil {
		return backend.ClaimResult{}, d.fail(ctx, "claim", err)
	}
	s, err := asSlice(v)
	if err != nil || (len(s) != 3 && len(s) != 4) {
		return backend.ClaimResult{}, d.fail(ctx, "claim", fmt.Errorf("unexpected reply (%d elements): %v", len(s), err))
	}
	outcome, _ := asInt(s[0])
	nowMs, _ := asInt(s[1])
	re, _ := asInt(s[2])
	res := backend.ClaimResult{Outcome: backend.ClaimOutcome(outcome), Reclaimed: re == 1, Now: msTime(q.Now, nowMs)}
	if res.Outcome < backend.ClaimNotFound || res.Outcome > backend.ClaimWaiting {
		return backend.ClaimResult{}, d.fail(ctx, "claim", fmt.Errorf("unknown outcome %d", outcome))
	}
	if len(s) == 3 {
		return res, nil
	}
	if res.Run, err = toRecord(layout.Run(q.RunID), s[3], nowMs); err != nil {
		return backend.ClaimResult{}, d.fail(ctx, "claim", err)
	}
	return res, nil
}
