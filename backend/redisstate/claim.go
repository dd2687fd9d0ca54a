package redisstate

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

// ClaimRun implements backend.Claimer: one script that reads the run (which
// holds its claim), decides as state.Store.ClaimRun does, and writes the
// run, the counter of claimed runs when the status changes and the history
// event (lua/claim.lua). Claims of one namespace made at the same moment
// share a script call (batch.go). A run stored as JSON (by an earlier
// version, see runs.go) is left to package state's portable claim:
// backend.ErrSkip.
func (d *Driver) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	if err := d.touch(ctx, q.NS); err != nil {
		return backend.ClaimResult{}, err
	}
	return d.claims.do(ctx, q.NS, q.Now, q)
}

// claimArgs appends the script arguments of claim q. The scripts take the
// event's writer where they once took the agent id, which they used for
// nothing else (the run keeps the agent as its JSON).
func claimArgs(args []any, q *backend.ClaimQuery) []any {
	agent, _ := json.Marshal(q.AgentID) // a string always encodes
	writer := q.Writer
	if writer == "" {
		writer = q.AgentID
	}
	return append(args, q.RunID, writer, ttlMs(q.TTL), agent)
}

// claimReply decodes the script's reply to claim q.
func claimReply(q *backend.ClaimQuery, v any) (backend.ClaimResult, error) {
	if v == "00" {
		return backend.ClaimResult{}, backend.ErrSkip
	}
	return claimResult(backend.RunKey(q.RunID), v, q.Now)
}

// claimResult decodes the reply of lua/claim.lua for the run at record key
// rk: the outcome and reclaimed as two digits, then for a run acquired or
// renewed its new record, whose updated time is the script's now, and for
// the other outcomes now (8 bytes, little-endian) and the run's record, if
// any.
func claimResult(rk string, v any, given time.Time) (backend.ClaimResult, error) {
	s, ok := v.(string)
	if !ok || len(s) < 2 || s[0] < '0'+byte(backend.ClaimNotFound) || s[0] > '0'+byte(backend.ClaimWaiting) ||
		(s[1] != '0' && s[1] != '1') {
		return backend.ClaimResult{}, fmt.Errorf("unexpected reply %T %.2q", v, s)
	}
	res := backend.ClaimResult{Outcome: backend.ClaimOutcome(s[0] - '0'), Reclaimed: s[1] == '1'}
	rec := s[2:]
	var nowMs int64
	if res.Outcome == backend.ClaimAcquired || res.Outcome == backend.ClaimRenewed {
		if len(rec) < recHeader {
			return backend.ClaimResult{}, fmt.Errorf("reply of %d bytes", len(s))
		}
		nowMs = le64(rec[16:])
	} else {
		if len(rec) < 8 {
			return backend.ClaimResult{}, fmt.Errorf("reply of %d bytes", len(s))
		}
		nowMs, rec = le64(rec), rec[8:]
	}
	res.Now = msTime(given, nowMs)
	if rec == "" {
		if res.Outcome != backend.ClaimNotFound {
			return backend.ClaimResult{}, fmt.Errorf("outcome %d without the run", res.Outcome)
		}
		return res, nil
	}
	var err error
	if res.Run, err = toRecord(rk, rec, nowMs); err != nil {
		return backend.ClaimResult{}, err
	}
	return res, nil
}
