// Package pyimport copies the data of a Python MCP State Sidecar
// (mcp-state-sidecar 0.1.0) into a store: from its SQLite file (tables
// kv_store, workflows, step_outputs, leases, sessions, history) or from its
// Redis (keys kv:, wf:meta:, wf:index, wf:step:, lease:, session:). The
// state-sidecar import command is this package's Import.
//
// What arrives:
//
//   - Keys, with their JSON values and remaining lifetimes; from SQLite also
//     the agent and time of the last history row that wrote the current
//     value (Python keeps neither on the key itself). Expired keys are not
//     imported.
//   - Runs, with their ids, names, tags, statuses, agents, last steps, step
//     outputs and created and updated times. Python claims never expire: a
//     claimed or running run with an agent arrives with attempt 1 and a
//     claim that expired at the import, so any agent (its former one
//     included) may claim it at once, keeping its last step and outputs —
//     the store's crash recovery. Step outputs of runs that do not exist
//     (Python's checkpoint of an unknown run) are skipped.
//   - Sessions, with their contexts; from SQLite also their update times.
//   - Live leases, held by their holders for what remains of their TTL,
//     with fence tokens of the store's. Expired leases are not imported.
//   - From SQLite, every history row as a "kv.set" event with its key, new
//     and previous values, agent and time (Python's Redis keeps no
//     history).
//
// What cannot be kept: Python's history ids (events get this namespace's
// ids, in the order of Python's ids, so an event whose time is earlier than
// its predecessor's, after a clock step, reads back in id order rather than
// Python's time order), a session's first save time (saved_at), and the
// original TTL of a lease or key (only what remains of it).
//
// Import never overwrites: a record whose key, run id, session id or
// resource already holds one in the store is kept as it is and reported as
// present, and history already copied from the same source is not copied
// again, so running an import twice duplicates nothing. Every record it
// writes is recorded in history with an op of its own ("kv.import",
// "workflow.import", "session.import", "lease.import").
package pyimport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
)

// ErrNotPython is wrapped by the error of Open (and OpenSQLite, OpenRedis)
// for a file or a Redis that holds no Python sidecar data.
var ErrNotPython = errors.New("not the data of a Python MCP State Sidecar")

// A Kind is a kind of record.
type Kind string

// The kinds of record, in the order Import copies them: history first, so
// that the events of the imported records come after it.
const (
	History  Kind = "history"
	Keys     Kind = "keys"
	Sessions Kind = "sessions"
	Leases   Kind = "leases"
	Runs     Kind = "runs"
	Outputs  Kind = "step outputs"
)

// Kinds lists the kinds in the order Import copies them.
var Kinds = []Kind{History, Keys, Sessions, Leases, Runs, Outputs}

// A Count says what became of the records of one kind.
type Count struct {
	// Found is how many the source holds.
	Found int
	// Imported were written to the store (in a dry run: would be, into an
	// empty namespace).
	Imported int
	// Present were already in the store and are kept as they are.
	Present int
	// Expired had expired in the source.
	Expired int
	// Skipped cannot be imported for a reason the Report's Notes give (an
	// output of a run that does not exist).
	Skipped int
	// Refused were refused by the store or could not be read; the Report's
	// Problems say why.
	Refused int
}

// A Problem is a record that was refused, and why.
type Problem struct {
	Kind Kind
	// ID is the record's key, run id, session id or resource id, or the
	// history row's id.
	ID     string
	Reason string
}

// String returns `<kind> "<id>": <reason>`.
func (p Problem) String() string { return fmt.Sprintf("%s %q: %s", p.Kind, p.ID, p.Reason) }

// A Report says what an import did.
type Report struct {
	// Source describes the source, as Source.String does.
	Source string
	DryRun bool
	Counts map[Kind]*Count
	// Problems lists the refused records.
	Problems []Problem
	// Notes explain skipped records.
	Notes []string
	// OldestEvent is the time of the oldest history event imported (zero
	// when none was): history retention removes events older than its age
	// limit.
	OldestEvent time.Time
}

// Refused returns how many records were refused, of every kind.
func (r *Report) Refused() int {
	n := 0
	for _, c := range r.Counts {
		n += c.Refused
	}
	return n
}

// A Progress is reported while a kind is imported.
type Progress struct {
	Kind Kind
	// Done of Total records of the kind have been dealt with.
	Done, Total int
}

// Options configure Import. A nil *Options means defaults.
type Options struct {
	// DryRun reads and checks everything and writes nothing to the store
	// (which may then be nil): every batch is imported into a scratch
	// memory store with Limits, emptied after each batch, so that the
	// Report says what an import into an empty namespace would do.
	DryRun bool
	// Limits are the scratch store's limits in a dry run: pass those of the
	// store an import would write to, so that the same records are refused.
	Limits state.Limits
	// Progress, if set, is called after every batch.
	Progress func(Progress)
	// StopOnProblem stops the import at the first record refused, with an
	// error that wraps ErrProblem and names it (its kind, its key or run
	// id, and why), after the batch that holds it. By default such a record
	// is skipped, listed in the Report's Problems, and the import goes on.
	// Either way a run of Import after it continues where it stopped:
	// Import never writes a record twice.
	StopOnProblem bool
}

// ErrProblem is wrapped by Import's error when Options.StopOnProblem
// stopped it at a refused record.
var ErrProblem = errors.New("pyimport: a record was refused")

// batchSize is how many records Import reads and writes at a time.
const batchSize = 500

// Import copies everything src holds into dst's namespace, kind after kind
// (history, keys, sessions, leases, runs with their outputs), in batches,
// and reports what became of every record. Records the store refuses (a key
// or value beyond its limits, a step below zero) are listed in the Report,
// and the rest is imported; the error is for failures that stop the import
// (the source or the store cannot be read or written, ctx ends). Import is
// idempotent: see the package documentation.
func Import(ctx context.Context, src *Source, dst *state.Store, opts *Options) (*Report, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	rep := &Report{Source: src.String(), DryRun: o.DryRun, Counts: map[Kind]*Count{}}
	for _, k := range Kinds {
		rep.Counts[k] = &Count{}
	}
	im := &importer{src: src.r, dst: dst, rep: rep, opts: o}
	if o.DryRun {
		scratch, err := state.New(memstate.New(), &state.Options{Limits: o.Limits, SweepInterval: -1, HistoryMaxEvents: -1})
		if err != nil {
			return nil, err
		}
		defer scratch.Close()
		im.dst = scratch
	} else if dst == nil {
		return nil, errors.New("pyimport: no store to import into")
	}
	found, err := src.r.count(ctx)
	if err != nil {
		return nil, err
	}
	for k, n := range found {
		rep.Counts[k].Found = n
	}
	for _, step := range []func(context.Context) error{im.history, im.entries, im.sessions, im.leases, im.runs} {
		if err := step(ctx); err != nil {
			return rep, err
		}
		if err := im.stopped(); err != nil {
			return rep, err
		}
	}
	rep.Notes = append(rep.Notes, src.r.notes()...)
	return rep, nil
}

// importer is one run of Import.
type importer struct {
	src  reader
	dst  *state.Store
	rep  *Report
	opts Options
}

// progress reports how far the import of kind k is.
func (im *importer) progress(k Kind) {
	if im.opts.Progress == nil {
		return
	}
	c := im.rep.Counts[k]
	im.opts.Progress(Progress{Kind: k, Done: c.Imported + c.Present + c.Expired + c.Skipped + c.Refused, Total: c.Found})
}

// scratchDone empties the scratch store of a dry run after a batch.
func (im *importer) scratchDone(ctx context.Context) error {
	if !im.opts.DryRun {
		return nil
	}
	_, err := im.dst.Reset(ctx)
	return err
}

// refuse records a refused record.
func (im *importer) refuse(k Kind, id, reason string) {
	im.rep.Counts[k].Refused++
	im.rep.Problems = append(im.rep.Problems, Problem{Kind: k, ID: id, Reason: reason})
}

// stopped returns the error that stops the import, with
// Options.StopOnProblem, once a record was refused.
func (im *importer) stopped() error {
	if !im.opts.StopOnProblem || len(im.rep.Problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (fix it in the source, or import without stopping to skip it; a new import continues where this one stopped)",
		ErrProblem, im.rep.Problems[0])
}

// reason turns an error of the store about one record into a reason
// naming the field without the batch's index ("entries[3].value is ..." →
// "value is ...").
func reason(err error) string {
	var fe *state.FieldError
	if errors.As(err, &fe) {
		f := fe.Field
		for _, batch := range []string{"entries[", "sessions[", "leases[", "events["} {
			if i := strings.Index(f, "]."); strings.HasPrefix(f, batch) && i > 0 {
				f = f[i+2:]
			}
		}
		return f + " " + fe.Problem
	}
	return err.Error()
}
