package state

import (
	"context"
	"strings"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// A LeasePage is one page of a lease listing.
type LeasePage struct {
	Leases []Lease
	// NextCursor continues the listing (WithCursor); "" when it is complete.
	NextCursor string
}

// A SessionPage is one page of a session listing.
type SessionPage struct {
	Sessions []Session
	// NextCursor continues the listing (WithCursor); "" when it is complete.
	NextCursor string
}

// An OutputPage is one page of a run's checkpointed outputs.
type OutputPage struct {
	Outputs []StepOutput
	// NextCursor continues the listing (WithCursor); "" when it is complete.
	NextCursor string
}

// Page sizes of ListLeases, ListSessions and ListOutputs.
const (
	DefaultRecordListLimit = 100
	MaxRecordListLimit     = 1000
)

// ListLeases returns a page of the live leases whose resource starts with
// prefix, in byte order of the resource. The prefix is literal and
// case-sensitive. It honours WithLimit (default 100, at most 1000) and
// WithCursor. Each page is one ordered read of the lease records: its cost
// does not depend on how many other records the namespace holds.
func (s *Store) ListLeases(ctx context.Context, prefix string, opts ...ListOption) (LeasePage, error) {
	var page LeasePage
	next, err := s.listRecords(ctx, layout.LeasePrefix, prefix, collect(opts), func(id string, r backend.Record) {
		page.Leases = append(page.Leases, Lease{Resource: id, Holder: r.Writer, Fence: r.CreateRevision,
			ExpiresAt: r.ExpiresAt, TTL: leaseTTLOf(r)})
	})
	page.NextCursor = next
	if page.Leases == nil {
		page.Leases = []Lease{}
	}
	return page, wrap("lease.list", prefix, err)
}

// ListSessions returns a page of the live sessions whose id starts with
// prefix, in byte order of the id, with their snapshots. It honours
// WithLimit (default 100, at most 1000) and WithCursor.
func (s *Store) ListSessions(ctx context.Context, prefix string, opts ...ListOption) (SessionPage, error) {
	var page SessionPage
	next, err := s.listRecords(ctx, layout.SessionPrefix, prefix, collect(opts), func(id string, r backend.Record) {
		page.Sessions = append(page.Sessions, Session{ID: id, Context: r.Value, Version: r.Revision,
			AgentID: r.Writer, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt})
	})
	page.NextCursor = next
	if page.Sessions == nil {
		page.Sessions = []Session{}
	}
	return page, wrap("session.list", prefix, err)
}

// ListOutputs returns a page of the checkpointed outputs of run id, by
// ascending step. It honours WithLimit (default 100, at most 1000) and
// WithCursor. A run without outputs, or an unknown run, gives an empty page:
// use GetRun to tell them apart.
func (s *Store) ListOutputs(ctx context.Context, id string, opts ...ListOption) (OutputPage, error) {
	if err := s.checkRunID(id); err != nil {
		return OutputPage{}, wrap("workflow.outputs", id, err)
	}
	var page OutputPage
	next, err := s.listRecords(ctx, layout.Outputs(id), "", collect(opts), func(key string, r backend.Record) {
		step, err := layout.StepOf(id, layout.Outputs(id)+key)
		if err != nil {
			return // not an output key of this run
		}
		page.Outputs = append(page.Outputs, StepOutput{Step: step, Output: r.Value})
	})
	page.NextCursor = next
	if page.Outputs == nil {
		page.Outputs = []StepOutput{}
	}
	return page, wrap("workflow.outputs", id, err)
}

// listRecords reads one page of the live records under kind+prefix, calling
// add with each one's id (its key without kind) and returning the cursor of
// the next page.
func (s *Store) listRecords(ctx context.Context, kind, prefix string, o callOptions, add func(id string, r backend.Record)) (string, error) {
	if len(prefix) > s.c.opts.Limits.MaxKeyBytes {
		return "", invalid("prefix", "is %d bytes long, the limit is %d", len(prefix), s.c.opts.Limits.MaxKeyBytes)
	}
	limit, err := pageLimit(o.limit, DefaultRecordListLimit, MaxRecordListLimit)
	if err != nil {
		return "", err
	}
	after, err := decodeCursor(o.cursor)
	if err != nil {
		return "", err
	}
	if after != "" && !strings.HasPrefix(after, prefix) {
		return "", invalid("cursor", "belongs to a listing of another prefix")
	}
	done, err := s.enter()
	if err != nil {
		return "", err
	}
	defer done()
	_, now := s.now()
	q := &backend.ListQuery{NS: s.ns, Prefix: kind + prefix, Limit: limit + 1, Now: now}
	if after != "" {
		q.After = kind + after
	}
	recs, err := s.c.drv.List(ctx, q)
	if err != nil {
		return "", err
	}
	next := ""
	for i, r := range recs {
		if i == limit {
			next = encodeCursor(recs[limit-1].Key[len(kind):])
			break
		}
		add(r.Key[len(kind):], r)
	}
	return next, nil
}
