package pyimport

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/statesidecar/state"
)

// An item is one record read from the source: the record as the store
// imports it, or why it cannot be.
type item[T any] struct {
	id  string
	rec T
	// expired is set for a record that had expired in the source.
	expired bool
	// problem says why the record could not be read, when it could not.
	problem string
}

// history copies the source's history after what the store already holds
// of it.
func (im *importer) history(ctx context.Context) error {
	source, err := im.src.historySource(ctx)
	if err != nil || source == "" {
		return err
	}
	c := im.rep.Counts[History]
	var mark int64
	if !im.opts.DryRun {
		if mark, err = im.dst.ImportedHistory(ctx, source); err != nil {
			return err
		}
	}
	if c.Present, err = im.src.historyUpTo(ctx, mark); err != nil {
		return err
	}
	return im.src.history(ctx, mark, func(items []item[state.ImportedEvent]) error {
		var evs []state.ImportedEvent
		for _, it := range items {
			if it.problem != "" {
				im.refuse(History, it.id, it.problem)
				continue
			}
			evs = append(evs, it.rec)
		}
		if err := im.importEvents(ctx, source, evs); err != nil {
			return err
		}
		if err := im.stopped(); err != nil {
			return err
		}
		im.progress(History)
		return im.scratchDone(ctx)
	})
}

// importEvents appends evs, one at a time when the store refuses the batch,
// to find the events it refuses.
func (im *importer) importEvents(ctx context.Context, source string, evs []state.ImportedEvent) error {
	if len(evs) == 0 {
		return nil
	}
	c := im.rep.Counts[History]
	n, err := im.dst.ImportHistory(ctx, source, evs)
	switch {
	case errors.Is(err, state.ErrInvalid) && len(evs) > 1:
		for i := range evs {
			if err := im.importEvents(ctx, source, evs[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	case errors.Is(err, state.ErrInvalid):
		im.refuse(History, strconv.FormatInt(evs[0].Seq, 10), reason(err))
		return nil
	case err != nil:
		return err
	}
	c.Imported += n
	c.Present += len(evs) - n
	for _, e := range evs[len(evs)-n:] { // ImportHistory skips the first ones, copied before
		if im.rep.OldestEvent.IsZero() || e.Time.Before(im.rep.OldestEvent) {
			im.rep.OldestEvent = e.Time
		}
	}
	return nil
}

// importBatch imports the readable, live records of items with f (one of
// the store's Import methods), one at a time when the store refuses the
// batch, to find the records it refuses.
func importBatch[T any](ctx context.Context, im *importer, k Kind, items []item[T], f func(context.Context, []T) ([]bool, error)) error {
	c := im.rep.Counts[k]
	var ids []string
	var recs []T
	for _, it := range items {
		switch {
		case it.problem != "":
			im.refuse(k, it.id, it.problem)
		case it.expired:
			c.Expired++
		default:
			ids = append(ids, it.id)
			recs = append(recs, it.rec)
		}
	}
	if err := importEach(ctx, im, k, ids, recs, f); err != nil {
		return err
	}
	if err := im.stopped(); err != nil {
		return err
	}
	im.progress(k)
	return im.scratchDone(ctx)
}

func importEach[T any](ctx context.Context, im *importer, k Kind, ids []string, recs []T, f func(context.Context, []T) ([]bool, error)) error {
	if len(recs) == 0 {
		return nil
	}
	written, err := f(ctx, recs)
	switch {
	case errors.Is(err, state.ErrInvalid) && len(recs) > 1:
		for i := range recs {
			if err := importEach(ctx, im, k, ids[i:i+1], recs[i:i+1], f); err != nil {
				return err
			}
		}
		return nil
	case errors.Is(err, state.ErrInvalid):
		im.refuse(k, ids[0], reason(err))
		return nil
	case err != nil:
		return err
	}
	c := im.rep.Counts[k]
	for _, w := range written {
		if w {
			c.Imported++
		} else {
			c.Present++
		}
	}
	return nil
}

func (im *importer) entries(ctx context.Context) error {
	return im.src.entries(ctx, func(items []item[state.ImportedEntry]) error {
		return importBatch(ctx, im, Keys, items, im.dst.ImportEntries)
	})
}

func (im *importer) sessions(ctx context.Context) error {
	return im.src.sessions(ctx, func(items []item[state.ImportedSession]) error {
		return importBatch(ctx, im, Sessions, items, im.dst.ImportSessions)
	})
}

func (im *importer) leases(ctx context.Context) error {
	return im.src.leases(ctx, func(items []item[state.ImportedLease]) error {
		return importBatch(ctx, im, Leases, items, im.dst.ImportLeases)
	})
}

// runWorkers is how many runs Import writes at once: each run is a commit
// of its own, and concurrent commits share a transaction on SQLite (group
// commit) and overlap their round trips on a network backend.
const runWorkers = 8

// runs imports runs, each with its outputs, runWorkers at a time.
func (im *importer) runs(ctx context.Context) error {
	runs, outs := im.rep.Counts[Runs], im.rep.Counts[Outputs]
	n, notes, err := im.src.skipped(ctx)
	if err != nil {
		return err
	}
	outs.Skipped += n
	im.rep.Notes = append(im.rep.Notes, notes...)
	return im.src.runs(ctx, func(items []item[state.ImportedRun]) error {
		var mu sync.Mutex // guards the report and errs
		var errs []error
		next := make(chan item[state.ImportedRun])
		var wg sync.WaitGroup
		for range runWorkers {
			wg.Go(func() {
				for it := range next {
					written, err := false, error(nil)
					if it.problem == "" {
						_, written, err = im.dst.ImportRun(ctx, it.rec)
					}
					mu.Lock()
					switch {
					case it.problem != "":
						im.refuse(Runs, it.id, it.problem)
						outs.Refused += len(it.rec.Outputs)
					case errors.Is(err, state.ErrInvalid):
						im.refuse(Runs, it.id, reason(err))
						outs.Refused += len(it.rec.Outputs)
					case err != nil:
						errs = append(errs, err)
					case written:
						runs.Imported++
						outs.Imported += len(it.rec.Outputs)
					default:
						runs.Present++
						outs.Present += len(it.rec.Outputs)
					}
					mu.Unlock()
				}
			})
		}
		for _, it := range items {
			next <- it
		}
		close(next)
		wg.Wait()
		if len(errs) > 0 {
			return errs[0]
		}
		if err := im.stopped(); err != nil {
			return err
		}
		im.progress(Runs)
		return im.scratchDone(ctx)
	})
}
