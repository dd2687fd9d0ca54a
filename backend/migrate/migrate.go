// Package migrate copies a store from one backend to another, driver to
// driver, so that a team can move from SQLite to S3 and back: every live
// record of a namespace (key-value entries, runs and their claims, leases,
// sessions, indexes and counters, as package state keeps them) with its
// value, writer, update time and remaining lifetime, and the namespace's
// history, oldest first, with each event's key, operation, values, writer
// and time.
//
// The target gives the copied records and events revisions and ids of its
// own. A target that can raise its revision counter (RevisionRaiser: every
// built-in backend) first makes its revisions start above every revision
// of the source, so that a lease's fence and an entry's version only grow
// across the move. Other targets (a driver from outside the module without
// the method) number from where they are, which Report says: fences held
// across such a move should be taken again. A run's fence is part of its
// record and is copied as it is.
//
// Without Options.Namespaces, Copy copies every namespace of a source that
// can name them (NamespaceLister: every built-in backend).
//
// Copy writes into empty namespaces only and reads the source as it goes:
// stop the writers first (a copy taken while they write may mix states).
package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/statesidecar/state/backend"
)

// NamespaceLister is implemented by drivers that can name their
// namespaces.
type NamespaceLister interface {
	Namespaces(ctx context.Context) ([]string, error)
}

// RevisionRaiser is implemented by drivers that can make a namespace's
// next revisions greater than a given one.
type RevisionRaiser interface {
	RaiseRevision(ctx context.Context, ns string, floor int64) error
}

// Options configure Copy. A nil *Options means defaults.
type Options struct {
	// Namespaces to copy; none means every namespace of the source when
	// it can name them (NamespaceLister), else "default".
	Namespaces []string
	// Progress, if set, is told what Copy does as it goes.
	Progress func(msg string)
}

// ErrNotEmpty is returned when a target namespace holds records or events.
var ErrNotEmpty = errors.New("migrate: the target namespace is not empty")

// Report says what Copy copied.
type Report struct {
	Namespaces []NamespaceReport
}

// NamespaceReport says what Copy copied of one namespace.
type NamespaceReport struct {
	Namespace string
	Records   int
	Events    int
	// MaxRevision is the greatest revision the source's records and
	// events had.
	MaxRevision int64
	// RevisionsAbove is set when the target's revisions were raised above
	// MaxRevision before the copy.
	RevisionsAbove bool
}

// batch is how many records or events one commit of the target writes.
const batch = 500

// Copy copies the namespaces of o from one driver to another.
func Copy(ctx context.Context, from, to backend.Driver, o *Options) (Report, error) {
	var opts Options
	if o != nil {
		opts = *o
	}
	say := func(format string, args ...any) {
		if opts.Progress != nil {
			opts.Progress(fmt.Sprintf(format, args...))
		}
	}
	nss := opts.Namespaces
	if len(nss) == 0 {
		nss = []string{"default"}
		if l, ok := from.(NamespaceLister); ok {
			all, err := l.Namespaces(ctx)
			if err != nil {
				return Report{}, fmt.Errorf("migrate: listing the source's namespaces: %w", err)
			}
			nss = all
		}
	}
	var rep Report
	for _, ns := range nss {
		nr, err := copyNamespace(ctx, from, to, ns, say)
		if err != nil {
			return rep, fmt.Errorf("migrate: namespace %q: %w", ns, err)
		}
		rep.Namespaces = append(rep.Namespaces, nr)
	}
	return rep, nil
}

// now returns the driver's clock when it has one, else the process's, to
// the millisecond (the precision of stored times, so that a lifetime
// computed from it ends where it ended).
func now(ctx context.Context, d backend.Driver) (time.Time, error) {
	t := time.Now()
	if sc, ok := d.(backend.ServerClock); ok {
		var err error
		if t, err = sc.ServerTime(ctx); err != nil {
			return t, err
		}
	}
	return t.UTC().Truncate(time.Millisecond), nil
}

func copyNamespace(ctx context.Context, from, to backend.Driver, ns string, say func(string, ...any)) (NamespaceReport, error) {
	nr := NamespaceReport{Namespace: ns}
	c, err := to.Count(ctx, &backend.CountQuery{NS: ns, Prefixes: []string{""}})
	if err != nil {
		return nr, err
	}
	if c.Prefixes[0] > 0 || c.Events > 0 {
		return nr, fmt.Errorf("%w: it holds %d records and %d history events", ErrNotEmpty, c.Prefixes[0], c.Events)
	}
	at, err := now(ctx, from)
	if err != nil {
		return nr, err
	}
	recs, err := readRecords(ctx, from, ns, at)
	if err != nil {
		return nr, fmt.Errorf("reading records: %w", err)
	}
	evs, err := readHistory(ctx, from, ns)
	if err != nil {
		return nr, fmt.Errorf("reading history: %w", err)
	}
	for _, r := range recs {
		nr.MaxRevision = max(nr.MaxRevision, r.Revision)
	}
	for _, e := range evs {
		nr.MaxRevision = max(nr.MaxRevision, e.Revision)
	}
	say("%s: %d records and %d history events read, revisions up to %d", ns, len(recs), len(evs), nr.MaxRevision)
	if rr, ok := to.(RevisionRaiser); ok && nr.MaxRevision > 0 {
		if err := rr.RaiseRevision(ctx, ns, nr.MaxRevision); err != nil {
			return nr, fmt.Errorf("raising the target's revisions: %w", err)
		}
		nr.RevisionsAbove = true
	}
	for chunk := range slices.Chunk(evs, batch) {
		txn := &backend.Txn{NS: ns, Now: at, Events: make([]backend.Event, len(chunk))}
		for i, e := range chunk {
			txn.Events[i] = backend.Event{Key: e.Key, Op: e.Op, Value: fillFence(e), Prev: e.Prev, Writer: e.Writer, Time: e.Time}
		}
		if err := commit(ctx, to, txn); err != nil {
			return nr, fmt.Errorf("writing history: %w", err)
		}
		nr.Events += len(chunk)
	}
	for chunk := range slices.Chunk(recs, batch) {
		txn := &backend.Txn{NS: ns, Now: at}
		for _, r := range chunk {
			op := backend.Op{Kind: backend.OpPut, Key: r.Key, Value: r.Value, Writer: r.Writer, Time: r.UpdatedAt}
			if !r.ExpiresAt.IsZero() {
				if op.TTL = r.ExpiresAt.Sub(at); op.TTL <= 0 {
					continue // expired while the copy read
				}
			}
			txn.Then = append(txn.Then, op)
		}
		if err := commit(ctx, to, txn); err != nil {
			return nr, fmt.Errorf("writing records: %w", err)
		}
		nr.Records += len(txn.Then)
	}
	say("%s: %d records and %d history events written", ns, nr.Records, nr.Events)
	return nr, nil
}

// fillFence returns the value of e with the fence a lease event leaves for
// its revision written in (package state fills it in when it reads the
// event): the copy has another revision, and must show the same fence.
func fillFence(e backend.Event) []byte {
	if !strings.HasPrefix(e.Op, "lease.") {
		return e.Value
	}
	var le backend.LeaseEvent
	if json.Unmarshal(e.Value, &le) != nil || le.Fence != 0 {
		return e.Value
	}
	le.Fence = e.Revision
	b, _ := json.Marshal(le)
	return b
}

func commit(ctx context.Context, d backend.Driver, txn *backend.Txn) error {
	if len(txn.Then) == 0 && len(txn.Events) == 0 {
		return nil
	}
	res, err := d.Commit(ctx, txn)
	if err == nil && !res.Committed {
		err = errors.New("the target refused an unconditional commit")
	}
	return err
}

// readRecords returns every record of ns live at at, in key order.
func readRecords(ctx context.Context, d backend.Driver, ns string, at time.Time) ([]backend.Record, error) {
	var out []backend.Record
	after := ""
	for {
		page, err := d.List(ctx, &backend.ListQuery{NS: ns, After: after, Limit: 1000, Now: at})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			return out, nil
		}
		after = page[len(page)-1].Key
	}
}

// readHistory returns every event of ns, oldest first.
func readHistory(ctx context.Context, d backend.Driver, ns string) ([]backend.Event, error) {
	var out []backend.Event
	var before int64
	for {
		page, err := d.History(ctx, &backend.HistoryQuery{NS: ns, Before: before, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < 1000 {
			slices.Reverse(out)
			return out, nil
		}
		before = page[len(page)-1].ID
	}
}
