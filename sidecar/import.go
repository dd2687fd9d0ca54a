package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/sqlitestate"
	"github.com/statesidecar/state/pyimport"
)

// ImportCommand returns the import command, which copies a Python MCP
// State Sidecar's data into the store the sidecar is configured with:
//
//	state-sidecar import [-namespace ns] [-dry-run] [-quiet] [-stop-on-problem] [settings] SOURCE
//
// SOURCE is the Python sidecar's SQLite file (its DB_PATH) or its Redis URL
// (its REDIS_URL). The store is chosen by the serve command's settings
// (STATE_BACKEND, DB_PATH, REDIS_URL, DATABASE_URL and their flags), and its
// limits and history retention apply. Progress goes to stderr, the summary
// to stdout. The exit status is 0 when every record was imported or was
// already there, 1 when some were refused (the summary lists them) or the
// import failed, 2 for a usage error. See package pyimport for what is
// imported and how.
func ImportCommand() Command {
	return Command{
		Name:  "import",
		Usage: "import [-namespace ns] [-dry-run] SOURCE   copy a Python sidecar's data (its SQLite file or REDIS_URL) into the store",
		Run:   runImport,
	}
}

// errRefused is the import's failure when the store refused records.
var errRefused = errors.New("records were refused")

func runImport(ctx context.Context, args []string, env Env) error {
	l := newLoader(Name+" import", env.LookupEnv, env.Stdout, nil)
	l.usage = writeImportUsage
	ns := l.fs.String("namespace", state.DefaultNamespace, "the store's namespace to import into")
	dry := l.fs.Bool("dry-run", false, "read and check everything, write nothing, and report what an import would do")
	quiet := l.fs.Bool("quiet", false, "no progress on stderr")
	stop := l.fs.Bool("stop-on-problem", false, "stop at the first record that cannot be imported, naming it (default: skip it, list it in the report, go on)")
	if err := l.parse(args); err != nil {
		return err
	}
	var source string
	if l.fs.NArg() > 0 { // flags may follow the source too
		source = l.fs.Arg(0)
		if err := l.parse(l.fs.Args()[1:]); err != nil {
			return err
		}
		if l.fs.NArg() > 0 {
			return fmt.Errorf("%w: import takes one source, got %q and %q", ErrConfig, source, l.fs.Arg(0))
		}
	}
	if source == "" {
		return fmt.Errorf("%w: import needs the Python sidecar's data: the path of its SQLite file (its DB_PATH) or its REDIS_URL, "+
			"such as %s import ./state_sidecar.db (-h says more)", ErrConfig, Name)
	}
	cfg, err := l.finish()
	if err != nil {
		return err
	}
	if cfg.Backend == BackendMemory && !*dry {
		return fmt.Errorf("%w: STATE_BACKEND=memory keeps nothing after the import ends: import into sqlite, redis or postgres", ErrConfig)
	}
	if err := checkNamespace(*ns); err != nil {
		return err
	}
	src, err := pyimport.Open(ctx, source)
	if err != nil {
		return err
	}
	defer src.Close()

	// The store's background warnings and the progress share stderr.
	stderr := &lockedWriter{w: env.Stderr}
	opts := &pyimport.Options{DryRun: *dry, Limits: cfg.Limits, StopOnProblem: *stop}
	if !*quiet {
		opts.Progress = progressPrinter(stderr)
	}
	target := "(none: dry run)"
	var st *state.Store
	if !*dry {
		var closeStore func()
		st, target, closeStore, err = openImportTarget(ctx, cfg, src, *ns, stderr)
		if err != nil {
			return err
		}
		defer closeStore()
	}
	rep, err := pyimport.Import(ctx, src, st, opts)
	if rep != nil {
		writeReport(env.Stdout, rep, target, *ns, cfg)
	}
	if err != nil {
		return fmt.Errorf("the import stopped: %w (what it wrote is kept: running it again goes on where it stopped)", err)
	}
	if n := rep.Refused(); n > 0 {
		return fmt.Errorf("%d %w (listed above): fix them in the Python data, or raise the limit they exceed (SIDECAR_MAX_*), "+
			"and run the import again; it imports only what is missing (refused history rows are not tried again)", n, errRefused)
	}
	return nil
}

// openImportTarget opens the configured store in namespace ns. A SQLite
// target that is the source file itself gets the store's tables beside the
// Python ones.
func openImportTarget(ctx context.Context, cfg Config, src *pyimport.Source, ns string, stderr io.Writer) (*state.Store, string, func(), error) {
	u, err := cfg.StoreURL()
	if err != nil {
		return nil, "", nil, err
	}
	inPlace := false
	if cfg.Backend == BackendSQLite && cfg.storeURL == "" && src.Path() != "" {
		a, errA := os.Stat(src.Path())
		b, errB := os.Stat(cfg.DBPath)
		inPlace = errA == nil && errB == nil && os.SameFile(a, b)
	}
	if inPlace {
		pu, _ := url.Parse(u)
		q := pu.Query()
		q.Set("beside_python", "true")
		pu.RawQuery = q.Encode()
		u = pu.String()
	}
	opts := &state.Options{
		Logger:           slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Limits:           cfg.Limits,
		ClaimTTL:         cfg.ClaimTTL,
		SweepInterval:    -1,
		HistoryMaxEvents: cfg.HistoryMaxEvents,
	}
	if opts.HistoryMaxEvents == 0 {
		opts.HistoryMaxEvents = -1
	}
	st, err := state.DefaultURLMux().Open(ctx, u, opts)
	if errors.Is(err, sqlitestate.ErrPythonDatabase) {
		return nil, "", nil, fmt.Errorf("%w: DB_PATH %s is another Python sidecar's database: import into a new file (set DB_PATH, or -db-path), "+
			"or into that file only from itself", ErrConfig, cfg.DBPath)
	}
	if err != nil {
		return nil, "", nil, fmt.Errorf("opening the %s backend at %s: %w", cfg.Backend, redact(u), err)
	}
	target, err := st.Namespace(ns)
	if err != nil {
		st.Close()
		return nil, "", nil, fmt.Errorf("%w: -namespace: %v", ErrConfig, err)
	}
	desc := cfg.Backend + " " + redact(u)
	if inPlace {
		desc = fmt.Sprintf("sqlite %q (the same file: the store's tables beside the Python ones, which stay as they are)", cfg.DBPath)
	}
	return target, desc, func() { _ = st.Close() }, nil
}

// checkNamespace validates a namespace name as the store does.
func checkNamespace(ns string) error {
	st, err := state.New(memstate.New(), &state.Options{Namespace: ns, SweepInterval: -1})
	var fe *state.FieldError
	if errors.As(err, &fe) {
		return fmt.Errorf("%w: -namespace: %v", ErrConfig, fe)
	}
	if err != nil {
		return err
	}
	return st.Close()
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// progressPrinter reports progress on w: a line per kind at most every
// second, and one when the kind is done.
func progressPrinter(w io.Writer) func(pyimport.Progress) {
	last := map[pyimport.Kind]time.Time{}
	return func(p pyimport.Progress) {
		if p.Done < p.Total && time.Since(last[p.Kind]) < time.Second {
			return
		}
		last[p.Kind] = time.Now()
		fmt.Fprintf(w, "%s import: %s %d/%d\n", Name, p.Kind, p.Done, p.Total)
	}
}

// writeReport prints what the import did (or, dry, would do).
func writeReport(w io.Writer, rep *pyimport.Report, target, ns string, cfg Config) {
	if rep.DryRun {
		fmt.Fprintf(w, "Dry run, nothing written: what an import from %s into an empty namespace %q would do.\n", rep.Source, ns)
	} else {
		fmt.Fprintf(w, "Imported from %s into %s, namespace %q.\n", rep.Source, target, ns)
	}
	imported := "imported"
	if rep.DryRun {
		imported = "would import"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "kind\tfound\t%s\talready there\texpired\tskipped\trefused\t\n", imported)
	for _, k := range pyimport.Kinds {
		c := rep.Counts[k]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", k, c.Found, c.Imported, c.Present, c.Expired, c.Skipped, c.Refused)
	}
	_ = tw.Flush()
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	for _, p := range rep.Problems {
		fmt.Fprintln(w, "refused:", p)
	}
	if age := cfg.HistoryMaxAge; age > 0 && !rep.OldestEvent.IsZero() && rep.OldestEvent.Before(time.Now().Add(-age)) {
		fmt.Fprintf(w, "warning: history entries older than SIDECAR_HISTORY_MAX_AGE_SECONDS (%s s; the oldest imported is from %s) "+
			"are removed by the sidecar's next sweep: set SIDECAR_HISTORY_MAX_AGE_SECONDS=0 when serving to keep them\n",
			showSeconds(age), rep.OldestEvent.Format(time.RFC3339))
	}
	if max := cfg.HistoryMaxEvents; max > 0 && int64(rep.Counts[pyimport.History].Imported) > max {
		fmt.Fprintf(w, "warning: only the newest %d history entries are kept (SIDECAR_HISTORY_MAX_EVENTS)\n", max)
	}
}

// writeImportUsage prints import -h.
func writeImportUsage(w io.Writer) {
	fmt.Fprintf(w, `Usage: %s import [-namespace ns] [-dry-run] [-quiet] [-stop-on-problem] [settings] SOURCE

Copies a Python MCP State Sidecar's data into the store this sidecar is configured with.
SOURCE is the Python sidecar's SQLite file (its DB_PATH) or its Redis URL (its REDIS_URL, redis://...).
The store is chosen by STATE_BACKEND, DB_PATH, REDIS_URL and DATABASE_URL (or their flags), as for serve;
with the defaults that is ./state_sidecar.db, the Python sidecar's default file: importing a file into
itself adds the store's tables beside the Python ones, which stay as they are.

Keys (with their remaining TTLs), runs (ids, names, tags, statuses, agents, last steps, outputs, times),
sessions, live leases and, from SQLite, the history are imported. A claimed or running run arrives with
a claim that has expired, so any agent can take it over at once. Records already in the store are kept
as they are: running the import again imports only what is missing. Stop the Python sidecar first.

  -namespace ns   the namespace to import into (default %q)
  -dry-run        read and check everything, write nothing, and report what an import would do
  -quiet          no progress on stderr
  -stop-on-problem  stop at the first record that cannot be imported (a time that is not a number
                  or is beyond the year 9999, a value beyond a limit), naming its table and key or
                  run id; by default such a record is skipped, listed in the report, and the rest imported

The serve settings apply (%s -h lists them), notably the limits (SIDECAR_MAX_*), which records must
fit. Exit status: 0 when everything was imported or already there, 1 when records were refused (the
summary lists them and why) or the import failed, 2 for a usage error.
`, Name, state.DefaultNamespace, Name)
}

// pythonDatabaseError explains a refusal to serve a Python sidecar's file.
func pythonDatabaseError(cfg Config) error {
	return fmt.Errorf("%w: DB_PATH %s is a Python MCP State Sidecar database and holds none of this sidecar's data, "+
		"so serving it would show an empty store: copy the Python data into the store first with\n\n    %s import %s\n\n"+
		"(into that same file, beside the Python tables, or into a new file given by DB_PATH), then start the sidecar again",
		ErrConfig, cfg.DBPath, Name, shellQuote(cfg.DBPath))
}

// shellQuote quotes a path for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
