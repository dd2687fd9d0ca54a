package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// Run listing page sizes.
const (
	DefaultRunLimit = 100
	MaxRunLimit     = 1000
)

// Status is the lifecycle state of a workflow run:
// created → claimed → running → done | failed. A join parent (WithJoin)
// starts waiting and becomes created when its last child finishes.
type Status string

// The statuses of a run.
const (
	StatusCreated Status = "created"
	StatusClaimed Status = "claimed"
	StatusRunning Status = "running"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
	// StatusWaiting is the status of a join parent (WithJoin) while it has
	// no children yet or some of them are still open: it cannot be claimed
	// (a *ClaimError matching ErrWaiting) until the last one finishes.
	StatusWaiting Status = "waiting"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusWaiting, StatusCreated, StatusClaimed, StatusRunning, StatusDone, StatusFailed}

// Valid reports whether s is one of the six statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Finished reports whether s is done or failed.
func (s Status) Finished() bool { return s == StatusDone || s == StatusFailed }

// A Run is a durable workflow run.
type Run struct {
	// ID is "wf-" followed by 12 lowercase hex digits.
	ID   string
	Name string
	Tags map[string]string
	// Status is the run's lifecycle state.
	Status Status
	// AgentID is the agent that claimed the run last (cleared by ReleaseRun).
	AgentID string
	// LastStep is the highest step checkpointed so far (0 before any).
	LastStep int64
	// Attempt counts the claims: 1 after the first, +1 per takeover.
	Attempt int64
	// Fence increases with every new claim; workers pass it to CheckpointRun
	// (WithFence) so that a stale worker cannot overwrite its successor.
	Fence     int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// ClaimExpiresAt is when the current claim expires (or expired); zero
	// when the run has no claim.
	ClaimExpiresAt time.Time
	// Claimable reports whether a ClaimRun by any agent would succeed: the
	// run is created, or claimed or running with its claim expired.
	Claimable bool
	// ParentID is the id of the run's parent (WithParent), or "".
	ParentID string
	// Join is set on a parent created to join its children (WithJoin).
	Join bool
	// Children counts the run's children by status. GetRun sets it for a
	// run that has children; it is nil otherwise, and in listings.
	Children map[Status]int64
	// Replayed is set by CreateRun when its idempotency key had already
	// made this run (WithIdempotencyKey): nothing was created.
	Replayed bool
}

// A RunPage is one page of runs, newest first.
type RunPage struct {
	Runs []Run
	// NextCursor continues the listing; "" when it is complete.
	NextCursor string
}

// A RunQuery selects runs for DiscoverRuns.
type RunQuery struct {
	// Tags selects runs having every one of these tag pairs.
	Tags map[string]string
	// Status selects runs in this status; "" means any.
	Status Status
	// Claimable selects runs that can be claimed now.
	Claimable bool
	// ParentID selects the children of this run.
	ParentID string
	// Limit bounds the page (default 100, at most 1000).
	Limit int
	// Cursor continues an earlier page.
	Cursor string
}

// newRunID returns "wf-" and 12 random lowercase hex digits.
func newRunID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "wf-" + hex.EncodeToString(b[:])
}

// checkRunID validates a run id argument (any id the store might hold).
func (s *Store) checkRunID(id string) error {
	return checkKey("run_id", id, s.c.opts.Limits.MaxKeyBytes)
}

// CreateRun registers a run named name with tags, in status created. It
// honours WithAgent (recorded in history as the creator), WithParent and
// WithJoin (see children.go) and WithIdempotencyKey (see idempotency.go).
func (s *Store) CreateRun(ctx context.Context, name string, tags map[string]string, opts ...CreateOption) (Run, error) {
	r, err := s.createRun(ctx, name, tags, collect(opts))
	return r, wrap("workflow.create", r.ID, err)
}

func (s *Store) createRun(ctx context.Context, name string, tags map[string]string, o callOptions) (Run, error) {
	lim := s.c.opts.Limits
	if err := checkKey("name", name, lim.MaxIDBytes); err != nil {
		return Run{}, err
	}
	if err := s.checkTags(tags); err != nil {
		return Run{}, err
	}
	if ctx, err := s.subjectCtx(ctx, o); err != nil {
		return Run{}, err
	} else if subject := subjectOf(ctx); subject != "" {
		o.subject = subject
		tags = maps.Clone(tags)
		if tags == nil {
			tags = map[string]string{}
		}
		tags[SubjectTag] = o.subject
		if err := s.c.drv.seal.c.Prepare(ctx, KeyScope{Namespace: s.ns, Subject: o.subject}, true); err != nil {
			return Run{}, err
		}
	}
	if err := checkOptionalID("agent_id", o.agent, lim.MaxIDBytes); err != nil {
		return Run{}, err
	}
	if o.has(optParent) {
		if err := checkKey("parent_run_id", o.parent, lim.MaxKeyBytes); err != nil {
			return Run{}, err
		}
	}
	if o.has(optIdem) {
		if err := checkKey("idempotency_key", o.idem, lim.MaxKeyBytes); err != nil {
			return Run{}, err
		}
	}
	done, err := s.enter()
	if err != nil {
		return Run{}, err
	}
	defer done()
	if o.parent != "" || o.has(optIdem) {
		return s.createLinked(ctx, name, tags, o)
	}
	for {
		id := newRunID()
		stamp, _ := s.now()
		v := newRunValue(name, tags, o, stamp)
		res, err := s.commit(ctx, createTxn(id, v, o.agent, stamp))
		if err != nil {
			return Run{ID: id}, err
		}
		if res.Committed {
			return runOf(id, v, v.CreatedAt), nil
		}
		// A run with this id exists (one in 2^48): draw another.
	}
}

// newRunValue returns the stored form of a new run.
func newRunValue(name string, tags map[string]string, o callOptions, stamp time.Time) *layout.RunValue {
	ms := layout.Ms(stamp)
	v := &layout.RunValue{Name: name, Tags: maps.Clone(tags), Status: layout.Created, CreatedAt: ms, UpdatedAt: ms,
		Parent: o.parent, Join: o.join}
	if v.Join {
		v.Status = layout.Waiting
	}
	if v.Tags == nil {
		v.Tags = map[string]string{}
	}
	return v
}

// createTxn writes new run id: the run, every index entry, the status
// counters (its parent's too) and the creation event, on condition that
// no run has its id.
func createTxn(id string, v *layout.RunValue, agent string, stamp time.Time) *backend.Txn {
	val, _ := json.Marshal(v)
	txn := &backend.Txn{
		If: []backend.Cond{{Key: layout.Run(id), Revision: 0}},
		Then: append([]backend.Op{{Kind: backend.OpPut, Key: layout.Run(id), Value: val, Time: stamp}},
			countOps(v, "", v.Status, stamp)...),
		Events: []backend.Event{{Key: id, Op: "workflow.create", Value: layout.CreateEventOf(v), Writer: agent}},
	}
	for _, k := range layout.IndexKeys(id, v) {
		txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: k, Time: stamp})
	}
	return txn
}

func (s *Store) checkTags(tags map[string]string) error {
	lim := s.c.opts.Limits
	if len(tags) > lim.MaxTags {
		return invalid("tags", "has %d tags, the limit is %d", len(tags), lim.MaxTags)
	}
	for k, v := range tags {
		if err := checkKey("tags", k, lim.MaxIDBytes); err != nil {
			return invalid("tags", "key %q %s", k, err.(*FieldError).Problem)
		}
		if err := checkOptionalID("tags", v, lim.MaxIDBytes); err != nil {
			return invalid("tags", "value of %q %s", k, err.(*FieldError).Problem)
		}
	}
	return nil
}

// runOf builds a Run from its stored value, judging its claim at nowMs.
func runOf(id string, v *layout.RunValue, nowMs int64) Run {
	r := Run{ID: id, Name: v.Name, Tags: v.Tags, Status: Status(v.Status), AgentID: v.AgentID,
		LastStep: v.LastStep, Attempt: v.Attempt, Fence: v.Fence,
		CreatedAt: layout.Time(v.CreatedAt), UpdatedAt: layout.Time(v.UpdatedAt), ParentID: v.Parent, Join: v.Join}
	if r.Tags == nil {
		r.Tags = map[string]string{}
	}
	if !r.Status.Finished() {
		r.ClaimExpiresAt = layout.Time(v.ClaimExpiresAt)
	}
	r.Claimable = r.Status == StatusCreated ||
		(r.Status == StatusClaimed || r.Status == StatusRunning) && !v.ClaimLive(nowMs)
	return r
}

// decodeRun decodes a stored run record.
func decodeRun(r backend.Record) (*layout.RunValue, error) {
	v, err := layout.DecodeRun(r.Value)
	if err != nil {
		return nil, fmt.Errorf("stored run %s is corrupt: %w", r.Key, err)
	}
	return v, nil
}

// runUpdateFunc computes the writes of an atomic change to one run from its
// stored value (which holds its claim), the records of the extra keys asked
// for and the time. Like updateFunc, it must not have side effects.
type runUpdateFunc func(v *layout.RunValue, extra []backend.Record, now time.Time) (*backend.Txn, error)

// updateRun applies fn to run id as one atomic read-modify-write of the
// run and the extra keys; a run that does not exist is ErrNotFound.
// Callers validate their arguments first.
//
// When fn finishes a child run, the same commit must see the parent and
// its counters of open children, to release a join parent (children.go).
// A run's parent never changes, so the first read that finds the run is
// a child finishing is abandoned and done again with the parent's keys.
func (s *Store) updateRun(ctx context.Context, id string, extra []string, fn runUpdateFunc) error {
	return s.updateRunAs(ctx, id, extra, false, fn)
}

// updateRunAs is updateRun; finishing says fn may finish the run, so that
// the parent of a child known to the store is read in the first attempt.
func (s *Store) updateRunAs(ctx context.Context, id string, extra []string, finishing bool, fn runUpdateFunc) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	var parent string
	var family []string // the parent's keys, once needed
	if finishing {
		if parent = s.c.parents.get(s.ns, id); parent != "" {
			family = familyKeys(parent)
		}
	}
	var box *subjectBox // the run's subject, whose keys seal its outputs
	if s.c.drv.seal != nil {
		ctx, box = withSubject(ctx, "")
	}
	for {
		keys := append(append([]string{layout.Run(id)}, extra...), family...)
		_, err = s.update(ctx, keys, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
			if !recs[0].Live() {
				return nil, ErrNotFound
			}
			v, err := decodeRun(recs[0])
			if err != nil {
				return nil, err
			}
			if box != nil {
				box.subject = v.Tags[SubjectTag]
			}
			txn, err := fn(v, recs[1:1+len(extra)], now)
			if err != nil || txn == nil || !finishesChild(v, txn) {
				return txn, err
			}
			if family == nil || parent != v.Parent {
				parent = v.Parent
				return nil, errNeedFamily
			}
			return txn, joinOps(txn, v.Parent, recs[1+len(extra):], now)
		})
		if err != errNeedFamily {
			return err
		}
		s.c.parents.put(s.ns, id, parent)
		family = familyKeys(parent)
	}
}

// runWrite returns a Txn that replaces run old by nv: the run record, the
// index entries that differ between the two, and the status counters when
// the status changed.
func runWrite(id string, old, nv *layout.RunValue, now time.Time) *backend.Txn {
	val, _ := json.Marshal(nv)
	txn := &backend.Txn{Then: []backend.Op{{Kind: backend.OpPut, Key: layout.Run(id), Value: val, Time: now}}}
	if old.Status == nv.Status {
		return txn
	}
	was, is := layout.IndexKeys(id, old), layout.IndexKeys(id, nv)
	for _, k := range was {
		if !slices.Contains(is, k) {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpDelete, Key: k})
		}
	}
	for _, k := range is {
		if !slices.Contains(was, k) {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: k, Time: now})
		}
	}
	txn.Then = append(txn.Then, countOps(nv, old.Status, nv.Status, now)...)
	return txn
}

// countOps updates the status counters for run v moving from status from
// to status to ("" for a new run), in a fixed order: the namespace's and,
// for a child, its parent's.
func countOps(v *layout.RunValue, from, to string, now time.Time) []backend.Op {
	d := layout.CountDeltas(from, to)
	ops := addOps(d, layout.StatusCount, now)
	if v.Parent != "" {
		ops = append(ops, addOps(d, func(c string) string { return layout.ChildCount(v.Parent, c) }, now)...)
	}
	return ops
}

// addOps adds the deltas d to the counters named by key, in the order of
// layout.Counters.
func addOps(d map[string]int, key func(counter string) string, now time.Time) []backend.Op {
	var ops []backend.Op
	for _, c := range layout.Counters {
		if n := d[c]; n != 0 {
			ops = append(ops, backend.Op{Kind: backend.OpAdd, Key: key(c), Value: []byte(strconv.Itoa(n)), Time: now})
		}
	}
	return ops
}

// GetRun returns the run with id, or an error matching ErrNotFound.
func (s *Store) GetRun(ctx context.Context, id string) (Run, error) {
	r, err := s.getRun(ctx, id)
	return r, wrap("workflow.status", id, err)
}

func (s *Store) getRun(ctx context.Context, id string) (Run, error) {
	if err := s.checkRunID(id); err != nil {
		return Run{}, err
	}
	done, err := s.enter()
	if err != nil {
		return Run{}, err
	}
	defer done()
	stamp, now := s.now()
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: append([]string{layout.Run(id)}, childCountKeys(id)...), Now: now})
	if err != nil {
		return Run{}, err
	}
	if !recs[0].Live() {
		return Run{}, ErrNotFound
	}
	v, err := decodeRun(recs[0])
	if err != nil {
		return Run{}, err
	}
	r := runOf(id, v, layout.Ms(stamp))
	if r.Children, err = childrenOf(recs[1:]); err != nil {
		return Run{}, err
	}
	return r, nil
}

// loadRuns reads runs in one call; a missing run gives nil.
func (s *Store) loadRuns(ctx context.Context, ids []string) ([]*Run, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = layout.Run(id)
	}
	stamp, now := s.now()
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: keys, Now: now})
	if err != nil {
		return nil, err
	}
	out := make([]*Run, len(ids))
	for i, id := range ids {
		if !recs[i].Live() {
			continue
		}
		v, err := decodeRun(recs[i])
		if err != nil {
			return nil, err
		}
		run := runOf(id, v, layout.Ms(stamp))
		out[i] = &run
	}
	return out, nil
}
