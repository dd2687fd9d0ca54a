package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
// created → claimed → running → done | failed.
type Status string

// The statuses of a run.
const (
	StatusCreated Status = "created"
	StatusClaimed Status = "claimed"
	StatusRunning Status = "running"
	StatusDone    Status = "done"
	StatusFailed  Status = "failed"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{StatusCreated, StatusClaimed, StatusRunning, StatusDone, StatusFailed}

// Valid reports whether s is one of the five statuses.
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
	// Fence increases with every new claim; workers pass it to Checkpoint
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
// honours WithAgent (recorded in history as the creator).
func (s *Store) CreateRun(ctx context.Context, name string, tags map[string]string, opts ...Option) (Run, error) {
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
	if err := checkOptionalID("agent_id", o.agent, lim.MaxIDBytes); err != nil {
		return Run{}, err
	}
	done, err := s.enter()
	if err != nil {
		return Run{}, err
	}
	defer done()
	for {
		id := newRunID()
		stamp, _ := s.now()
		ms := layout.Ms(stamp)
		v := &layout.RunValue{Name: name, Tags: maps.Clone(tags), Status: string(StatusCreated),
			CreatedAt: ms, UpdatedAt: ms, Order: layout.Order(ms, id)}
		if v.Tags == nil {
			v.Tags = map[string]string{}
		}
		val, _ := json.Marshal(v)
		txn := &backend.Txn{
			If:     []backend.Cond{{Key: layout.Run(id), Revision: 0}},
			Then:   []backend.Op{{Kind: backend.OpPut, Key: layout.Run(id), Value: val, Time: stamp}},
			Events: []backend.Event{{Key: id, Op: "workflow.create", Value: layout.EventOf(v, nil), Writer: o.agent}},
		}
		for _, k := range v.IndexKeys(id) {
			txn.Then = append(txn.Then, backend.Op{Kind: backend.OpPut, Key: k, Time: stamp})
		}
		res, err := s.commit(ctx, txn)
		if err != nil {
			return Run{ID: id}, err
		}
		if res.Committed {
			return runOf(id, v, backend.Record{}), nil
		}
		// A run with this id exists (one in 2^48): draw another.
	}
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

// runOf builds a Run from its stored value and its claim record.
func runOf(id string, v *layout.RunValue, claim backend.Record) Run {
	r := Run{ID: id, Name: v.Name, Tags: v.Tags, Status: Status(v.Status), AgentID: v.AgentID,
		LastStep: v.LastStep, Attempt: v.Attempt, Fence: v.Fence,
		CreatedAt: layout.Time(v.CreatedAt), UpdatedAt: layout.Time(v.UpdatedAt)}
	if r.Tags == nil {
		r.Tags = map[string]string{}
	}
	if claim.Found() && !r.Status.Finished() {
		r.ClaimExpiresAt = claim.ExpiresAt
	}
	r.Claimable = r.Status == StatusCreated ||
		(r.Status == StatusClaimed || r.Status == StatusRunning) && !claim.Live()
	return r
}

// decodeRun decodes a stored run record.
func decodeRun(r backend.Record) (*layout.RunValue, error) {
	var v layout.RunValue
	if err := json.Unmarshal(r.Value, &v); err != nil {
		return nil, fmt.Errorf("stored run %s is corrupt: %w", r.Key, err)
	}
	return &v, nil
}

// runUpdateFunc computes the writes of an atomic change to one run from its
// stored value, its claim record, the records of the extra keys asked for
// and the time. Like updateFunc, it must not have side effects.
type runUpdateFunc func(v *layout.RunValue, claim backend.Record, extra []backend.Record, now time.Time) (*backend.Txn, error)

// updateRun applies fn to run id as one atomic read-modify-write of the
// run, its claim and the extra keys; a run that does not exist is
// ErrNotFound. Callers validate their arguments first.
func (s *Store) updateRun(ctx context.Context, id string, extra []string, fn runUpdateFunc) error {
	done, err := s.enter()
	if err != nil {
		return err
	}
	defer done()
	keys := append([]string{layout.Run(id), layout.Claim(id)}, extra...)
	_, err = s.update(ctx, keys, func(recs []backend.Record, now time.Time) (*backend.Txn, error) {
		if !recs[0].Live() {
			return nil, ErrNotFound
		}
		v, err := decodeRun(recs[0])
		if err != nil {
			return nil, err
		}
		return fn(v, recs[1], recs[2:], now)
	})
	return err
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
	runs, err := s.loadRuns(ctx, []string{id})
	if err != nil {
		return Run{}, err
	}
	if runs[0] == nil {
		return Run{}, ErrNotFound
	}
	return *runs[0], nil
}

// loadRuns reads runs and their claims; a missing run gives nil.
func (s *Store) loadRuns(ctx context.Context, ids []string) ([]*Run, error) {
	keys := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		keys = append(keys, layout.Run(id), layout.Claim(id))
	}
	_, now := s.now()
	recs, err := s.c.drv.GetMany(ctx, &backend.GetQuery{NS: s.ns, Keys: keys, Now: now, IncludeExpired: true})
	if err != nil {
		return nil, err
	}
	out := make([]*Run, len(ids))
	for i, id := range ids {
		rr, cr := recs[2*i], recs[2*i+1]
		if !rr.Live() {
			continue
		}
		v, err := decodeRun(rr)
		if err != nil {
			return nil, err
		}
		run := runOf(id, v, cr)
		out[i] = &run
	}
	return out, nil
}

// ListRuns returns every run, newest first. It honours WithLimit (default
// 100, at most 1000) and WithCursor.
func (s *Store) ListRuns(ctx context.Context, opts ...Option) (RunPage, error) {
	o := collect(opts)
	p, err := s.discover(ctx, RunQuery{Limit: o.limit, Cursor: o.cursor})
	return p, wrap("workflow.list", "", err)
}

// DiscoverRuns returns the runs matching q, newest first.
func (s *Store) DiscoverRuns(ctx context.Context, q RunQuery) (RunPage, error) {
	p, err := s.discover(ctx, q)
	return p, wrap("workflow.discover", "", err)
}

func (s *Store) discover(ctx context.Context, q RunQuery) (RunPage, error) {
	if q.Status != "" && !q.Status.Valid() {
		return RunPage{}, invalid("status", "must be one of created, claimed, running, done, failed; got %q", q.Status)
	}
	if err := s.checkTags(q.Tags); err != nil {
		return RunPage{}, err
	}
	limit, err := pageLimit(q.Limit, DefaultRunLimit, MaxRunLimit)
	if err != nil {
		return RunPage{}, err
	}
	after, err := decodeCursor(q.Cursor)
	if err != nil {
		return RunPage{}, err
	}
	if q.Claimable && q.Status.Finished() {
		return RunPage{Runs: []Run{}}, nil
	}
	done, err := s.enter()
	if err != nil {
		return RunPage{}, err
	}
	defer done()
	prefixes, err := s.runSources(ctx, q)
	if err != nil {
		return RunPage{}, err
	}
	m := newIndexMerge(s, prefixes, after)
	page := RunPage{Runs: []Run{}}
	seen := map[string]bool{}
	for len(page.Runs) < limit {
		orders, err := m.next(ctx, max(limit-len(page.Runs), 16))
		if err != nil {
			return RunPage{}, err
		}
		if len(orders) == 0 {
			return page, nil
		}
		ids := make([]string, len(orders))
		for i, o := range orders {
			ids[i] = o[strings.IndexByte(o, '/')+1:]
		}
		runs, err := s.loadRuns(ctx, ids)
		if err != nil {
			return RunPage{}, err
		}
		for i, r := range runs {
			if r == nil || seen[r.ID] || !q.matches(r) {
				continue
			}
			seen[r.ID] = true
			page.Runs = append(page.Runs, *r)
			if len(page.Runs) == limit {
				page.NextCursor = encodeCursor(orders[i])
				break
			}
		}
	}
	return page, nil
}

func (q *RunQuery) matches(r *Run) bool {
	if q.Status != "" && r.Status != q.Status {
		return false
	}
	if q.Claimable && !r.Claimable {
		return false
	}
	for k, v := range q.Tags {
		if tv, ok := r.Tags[k]; !ok || tv != v {
			return false
		}
	}
	return true
}

// runSources picks the index to walk for q: the status index(es), one tag's
// index or the index of all runs, whichever holds the fewest entries. The
// other conditions are checked on each run.
func (s *Store) runSources(ctx context.Context, q RunQuery) ([]string, error) {
	var groups [][]string
	switch {
	case q.Status != "":
		groups = append(groups, []string{layout.StatusIndex(string(q.Status))})
	case q.Claimable:
		groups = append(groups, []string{layout.StatusIndex(string(StatusCreated)),
			layout.StatusIndex(string(StatusClaimed)), layout.StatusIndex(string(StatusRunning))})
	}
	for _, k := range slices.Sorted(maps.Keys(q.Tags)) {
		groups = append(groups, []string{layout.TagIndex(k, q.Tags[k])})
	}
	switch len(groups) {
	case 0:
		return []string{layout.IndexAll}, nil
	case 1:
		return groups[0], nil
	}
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	_, now := s.now()
	c, err := s.c.drv.Count(ctx, &backend.CountQuery{NS: s.ns, Prefixes: all, Now: now})
	if err != nil {
		return nil, err
	}
	best, bestN, i := 0, int64(-1), 0
	for gi, g := range groups {
		var n int64
		for range g {
			n += c.Prefixes[i]
			i++
		}
		if bestN < 0 || n < bestN {
			best, bestN = gi, n
		}
	}
	return groups[best], nil
}

// indexMerge walks several run indexes at once in order of their suffixes
// (newest run first).
type indexMerge struct {
	s     *Store
	srcs  []*indexSource
	after string
}

type indexSource struct {
	prefix string
	buf    []string // suffixes read but not yet consumed
	done   bool
}

func newIndexMerge(s *Store, prefixes []string, after string) *indexMerge {
	m := &indexMerge{s: s, after: after}
	for _, p := range prefixes {
		m.srcs = append(m.srcs, &indexSource{prefix: p})
	}
	return m
}

// next returns up to n more suffixes in order.
func (m *indexMerge) next(ctx context.Context, n int) ([]string, error) {
	var out []string
	for len(out) < n {
		var best *indexSource
		for _, src := range m.srcs {
			if len(src.buf) == 0 && !src.done {
				if err := m.fill(ctx, src, n); err != nil {
					return nil, err
				}
			}
			if len(src.buf) > 0 && (best == nil || src.buf[0] < best.buf[0]) {
				best = src
			}
		}
		if best == nil {
			break
		}
		m.after = best.buf[0]
		best.buf = best.buf[1:]
		out = append(out, m.after)
	}
	return out, nil
}

func (m *indexMerge) fill(ctx context.Context, src *indexSource, n int) error {
	_, now := m.s.now()
	q := &backend.ListQuery{NS: m.s.ns, Prefix: src.prefix, Limit: n, Now: now, KeysOnly: true}
	if m.after != "" {
		q.After = src.prefix + m.after
	}
	recs, err := m.s.c.drv.List(ctx, q)
	if err != nil {
		return err
	}
	for _, r := range recs {
		src.buf = append(src.buf, r.Key[len(src.prefix):])
	}
	src.done = len(recs) < n
	return nil
}
