package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/statesidecar/state"
)

// storageN is how many of each kind the storage measurement writes.
const storageN = 10_000

// measureStorage writes storageN records of each kind into a fresh store,
// one kind after another, and prints the bytes each takes. Every write
// appends a history entry, so the entry is measured first (the same key
// overwritten) and subtracted from the others.
func measureStorage(ctx context.Context, t *target, w io.Writer) error {
	st := t.st
	if t.unweighed {
		return fmt.Errorf("-storage cannot weigh a %s store", st.Backend())
	}
	steps := []struct {
		name   string
		events int // history entries each record's writes append
		write  func(i int) error
	}{
		{"history entry (kv.set of a 40-byte value: value and previous value)", 1, func(i int) error {
			_, err := st.Set(ctx, "history/one", valueOf(i))
			return err
		}},
		{"key-value entry (40-byte value)", 1, func(i int) error {
			_, err := st.Set(ctx, keyName(i), valueOf(i))
			return err
		}},
		{"run, created (2 tags)", 1, func(i int) error {
			_, err := st.CreateRun(ctx, "job", map[string]string{"pipeline": pipelineTag(i), "team": "t1"})
			return err
		}},
		{"lease", 1, func(i int) error {
			_, err := st.TryAcquireLease(ctx, leaseName(i), workerName(i), time.Hour)
			return err
		}},
	}
	var perEvent float64
	fmt.Fprintf(w, "| record | bytes each | of which its history entry |\n|---|---:|---:|\n")
	for _, s := range steps {
		before, err := t.bytes(ctx)
		if err != nil {
			return err
		}
		for i := range storageN {
			if err := s.write(i); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		after, err := t.bytes(ctx)
		if err != nil {
			return err
		}
		each := float64(after-before) / storageN
		if perEvent == 0 {
			perEvent = each
			fmt.Fprintf(w, "| %s | %.0f | |\n", s.name, each)
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | ~%.0f |\n", s.name, each-float64(s.events)*perEvent, float64(s.events)*perEvent)
	}
	// Finishing the runs moves them out of the open indexes and appends one
	// more history entry each.
	p, err := st.DiscoverRuns(ctx, state.RunQuery{Limit: 1})
	if err != nil || len(p.Runs) == 0 {
		return fmt.Errorf("finding the runs: %v", err)
	}
	before, err := t.bytes(ctx)
	if err != nil {
		return err
	}
	cursor, done := "", 0
	for {
		page, err := st.ListRuns(ctx, state.WithLimit(state.MaxRunLimit), state.WithCursor(cursor))
		if err != nil {
			return err
		}
		for _, r := range page.Runs {
			if _, err := st.CompleteRun(ctx, r.ID); err != nil {
				return err
			}
			done++
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	after, err := t.bytes(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "| run, created then done: what finishing adds (one more history entry) | %+.0f | ~%.0f |\n",
		float64(after-before)/float64(done)-perEvent, perEvent)
	return nil
}
