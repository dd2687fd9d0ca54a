package pgstate

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state/backend"
)

// needParent is the claim function's answer when the run is a child whose
// fresh claim must also count on its parent, named in the answer's writer
// (see migrations/004_run_columns.sql).
const needParent = 7

// countClaimed is the record key of the counter of claimed runs.
const countClaimed = backend.ClaimedRunsKey

// skipped is the claim function's answer when the run's columns do not
// hold its fields (see migrations/004_run_columns.sql).
const skipped = 0

// ClaimRun implements backend.Claimer: one call of the claim_run function (see
// migrations/004_run_columns.sql), which reads the run's fields from its
// columns (holding its claim), decides as state.Store.ClaimRun does, and
// writes the run, the counter of claimed runs when the status changes and
// the history event. A heartbeat (the holder claiming again) is the same
// one call. Claims made at the same moment share a round trip and a
// transaction (see batcher). A run whose columns do not hold its fields
// (one stored before schema version 4) is left to package state's portable
// claim: backend.ErrSkip. So is a claim whose event's writer is not its
// agent (q.Writer: an agent acting for an authenticated principal), which
// the claim function, writing the agent, cannot record.
func (d *Driver) ClaimRun(ctx context.Context, q *backend.ClaimQuery) (backend.ClaimResult, error) {
	if q.Writer != "" && q.Writer != q.AgentID {
		return backend.ClaimResult{}, backend.ErrSkip
	}
	agent, err := json.Marshal(q.AgentID)
	if err != nil {
		return backend.ClaimResult{}, fmt.Errorf("pgstate: claim: %w", err)
	}
	key := backend.RunKey(q.RunID)
	// The run's lock first, and the counter's only when the counter is
	// written: the order of Update, whose checkpoints and releases lock the
	// run to read it and the counters when they commit.
	c := &claimCall{ns: q.NS, now: nowArg(q.Now), runLock: d.lockKey(q.NS, key), key: []byte(key),
		id: []byte(q.RunID), agent: q.AgentID, agentJSON: string(agent), ttl: ttlMs(q.TTL)}
	out, err := d.claims.do(ctx, q.NS, c.runLock, c)
	if err != nil {
		return backend.ClaimResult{}, d.fail(ctx, "claim", err)
	}
	if out.outcome == skipped {
		return backend.ClaimResult{}, backend.ErrSkip
	}
	res := backend.ClaimResult{Outcome: backend.ClaimOutcome(out.outcome), Reclaimed: out.reclaimed, Now: timeOf(q.Now, out.nowMs)}
	if res.Outcome < backend.ClaimNotFound || res.Outcome > backend.ClaimWaiting {
		return backend.ClaimResult{}, fmt.Errorf("pgstate: claim: unknown outcome %d", out.outcome)
	}
	if res.Outcome != backend.ClaimNotFound {
		res.Run = out.rec.record(key)
	}
	return res, nil
}

// claimCall is the arguments of one call of the claim function.
type claimCall struct {
	ns               string
	now              any
	runLock          int64
	key, id          []byte
	agent, agentJSON string
	ttl              int64
	// A child's fresh claim also counts on its parent: the first call
	// names the parent (needParent) and the second brings its counter and
	// lock.
	parent    *string
	childKey  []byte
	childLock int64
}

// claimOut is the claim function's answer.
type claimOut struct {
	outcome   int32
	nowMs     int64
	reclaimed bool
	rec       recordRow
}

// claimKind sends claims (batchKind).
type claimKind struct{ d *Driver }

func (k claimKind) args(c *claimCall) []any {
	d := k.d
	return []any{c.ns, c.now, d.nsLock(c.ns), c.runLock, d.lockKey(c.ns, countClaimed), c.key, c.id, c.agent,
		c.agentJSON, c.ttl, []byte(countClaimed), c.childLock, c.childKey, c.parent}
}

func (k claimKind) queue(b *pgx.Batch, c *claimCall) { b.Queue(k.d.q.claim, k.args(c)...) }

// scan reads a claim's answer. When the run is a child whose parent must
// count the claim too (needParent), it sets c up for the second call and
// asks for it.
func (k claimKind) scan(row pgx.Row, c *claimCall) (*claimOut, bool, error) {
	var o claimOut
	if err := row.Scan(&o.outcome, &o.nowMs, &o.reclaimed, &o.rec.value, &o.rec.writer, &o.rec.rev,
		&o.rec.crev, &o.rec.upd, &o.rec.exp); err != nil {
		return nil, false, err
	}
	if o.outcome != needParent || o.rec.writer == nil {
		return &o, false, nil
	}
	c.parent, c.childKey = o.rec.writer, []byte(backend.ClaimedChildrenKey(*o.rec.writer))
	c.childLock = k.d.lockKey(c.ns, string(c.childKey))
	return &o, true, nil
}

func (k claimKind) single(ctx context.Context, qr querier, c *claimCall) (*claimOut, error) {
	for {
		o, again, err := k.scan(qr.QueryRow(ctx, k.d.q.claim, k.args(c)...), c)
		// A commit that locks the counter before the run (in sorted order)
		// may meet a claim that locked the run first: the database breaks
		// the wait by failing one side, which starts again.
		if !again && !deadlocked(ctx, err) {
			return o, err
		}
	}
}
