// Command scale measures how the cost of each store operation changes as a
// store grows: it fills a store to each size in turn (ten thousand, a
// hundred thousand and a million records by default), and at each size
// times a few thousand calls of every operation, one at a time, and prints
// their p50 and p99 beside the storage the store takes per 1,000 records.
// Any backend registered with package state works: give its URL.
//
//	cd examples   # a module of its own
//	go run ./scale -url mem://
//	go run ./scale -url sqlite:///tmp/scale.db          # a new file; removed afterwards unless -keep
//	go run ./scale -url 'redis://127.0.0.1:6379/0'      # in a prefix of its own, purged afterwards
//	go run ./scale -url 'postgres://postgres@127.0.0.1/test'  # in a schema of its own, dropped afterwards
//	go run ./scale -url mem:// -sizes 10000,100000 -ops 500
//	go run ./scale -url sqlite:///tmp/s.db -storage     # bytes per key, run and history entry
//	go run ./scale -url mem:// -lock /tmp/bench.lock    # measure holding flock(1)'s lock, fill without
//	go run ./scale -raw                                 # the raw engines under the memory backend
//	go run ./scale -url 's3://bucket?endpoint=http://127.0.0.1:7070'  # under a prefix of its own, deleted afterwards
//	go run ./scale -url file:///tmp/scale-dir           # a directory store; its files deleted afterwards unless -keep
//
// A store of size N holds 70% key-value entries (keys "user/<group>/<nn>",
// a hundred per group), 20% workflow runs (tagged with one of 10
// pipelines and one of 7 teams; a tenth created, a tenth running under a
// live claim, the rest done) and 10% leases, plus the history of every
// write, trimmed to the store's retention cap (100,000 entries) before
// measuring. The store is filled through package state's own calls, as
// an application would write it; PostgreSQL's through a second store on
// the same schema whose commits do not wait for the disk
// (synchronous_commit=off), which writes the same rows in half the time,
// and then vacuumed and analyzed as autovacuum would have done meanwhile.
// The timed calls go through the store as configured. The operations are:
//
//	Get, Set                   a random existing key
//	ClaimRun                   a fresh claim of a created run
//	TryAcquire                 a lease on a new resource
//	Discover tags+claimable    claimable runs of a random pipeline, 10 per page
//	Discover status=running    running runs, 10 per page
//	Discover status=done       done runs, 10 per page
//	List first page            a random group's prefix (100 keys), 20 per page
//	List later page            the same, the page after 60 keys, through the cursor
//	History key                the newest 10 entries of a random key
//	History all                the newest 10 entries
//
// The operations take turns in four rounds, so that a burst of load from
// elsewhere spreads over all of them. The ratio column divides the p50 at
// the largest size by the p50 at the smallest: 1.0 is perfectly flat.
// Timings on a machine doing other work are noisy; rerun on a quiet one
// for figures to publish.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	_ "github.com/statesidecar/state/backend/filestate" // object-store backends (issue 23)
	_ "github.com/statesidecar/state/backend/memstate"
	_ "github.com/statesidecar/state/backend/pgstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/examples/internal/cli"
)

func main() {
	cli.Main("scale", func(ctx context.Context) error { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// options are the command's flags.
type options struct {
	url     string
	sizes   []int
	ops     int
	workers int
	storage bool
	raw     bool
	keep    bool
	profile string
	lock    string
}

func parse(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.url, "url", "mem://", "store URL: mem://, sqlite:///path (a new file), redis://host:port/db, postgres://user@host/db")
	sizes := fs.String("sizes", "10000,100000,1000000", "store sizes in records, ascending, comma-separated")
	fs.IntVar(&o.ops, "ops", 2000, "timed calls of each operation at each size")
	fs.IntVar(&o.workers, "workers", 32, "concurrent writers while filling")
	fs.BoolVar(&o.storage, "storage", false, "measure the bytes of one key, one run and one history entry instead")
	fs.BoolVar(&o.raw, "raw", false, "time the raw engines under the memory backend (a map, a B-tree, a sorted slice) instead of a store")
	fs.BoolVar(&o.keep, "keep", false, "keep the SQLite file, the Redis keys or the PostgreSQL schema afterwards")
	fs.StringVar(&o.profile, "cpuprofile", "", "write a CPU profile of the timed calls (not the filling) to this file")
	fs.StringVar(&o.lock, "lock", "", "hold an exclusive flock on this file while measuring each size (not while filling), as flock(1) would")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	prev := 0
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 100 || n <= prev {
			return o, fmt.Errorf("-sizes: %q is not a size of at least 100 above the one before", s)
		}
		o.sizes, prev = append(o.sizes, n), n
	}
	if o.ops < 10 || o.workers < 1 {
		return o, errors.New("-ops must be at least 10 and -workers at least 1")
	}
	return o, nil
}

// run fills and measures, and prints the table to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if o.raw {
		fmt.Fprintf(stdout, "scale: raw engines, %s, GOMAXPROCS=%d; %d calls per operation and size\n",
			runtime.Version(), runtime.GOMAXPROCS(0), o.ops)
		return runRaw(ctx, o, stdout, stderr)
	}
	tgt, err := openTarget(ctx, o.url, o.keep)
	if err != nil {
		return err
	}
	defer func() {
		if err := tgt.close(); err != nil {
			fmt.Fprintln(stderr, "scale: cleaning up:", err)
		}
	}()
	fmt.Fprintf(stdout, "scale: %s on %s, %s, GOMAXPROCS=%d; %d calls per operation and size\n",
		tgt.st.Backend(), tgt.describe, runtime.Version(), runtime.GOMAXPROCS(0), o.ops)
	if o.storage {
		return measureStorage(ctx, tgt, stdout)
	}
	f := &filler{st: tgt.fill, workers: o.workers}
	var cols []column
	for _, n := range o.sizes {
		start := time.Now()
		if err := f.fillTo(ctx, n); err != nil {
			return fmt.Errorf("filling to %d records: %w", n, err)
		}
		if _, err := tgt.st.Sweep(ctx); err != nil { // trim history to its cap, as the background sweeper would
			return err
		}
		if tgt.settle != nil {
			if err := tgt.settle(ctx); err != nil {
				return err
			}
		}
		filled := time.Since(start)
		bytes, err := tgt.bytes(ctx)
		if err != nil {
			return fmt.Errorf("measuring storage: %w", err)
		}
		fmt.Fprintf(stderr, "scale: %d records filled in %v; measuring\n", n, filled.Round(time.Millisecond))
		res, err := measureLocked(ctx, f, tgt.st, n, o, stderr)
		if err != nil {
			return fmt.Errorf("at %d records: %w", n, err)
		}
		if tgt.unweighed {
			bytes = -1
		}
		cols = append(cols, column{size: n, results: res, bytes: bytes, fill: filled})
	}
	return report(stdout, cols)
}

// measureLocked measures one size, holding the lock of o.lock if set.
func measureLocked(ctx context.Context, f *filler, st *state.Store, n int, o options, stderr io.Writer) ([]result, error) {
	var res []result
	err := withLock(o.lock, stderr, func() error {
		var err error
		res, err = measureProfiled(ctx, f, st, n, o.ops, o.profile)
		return err
	})
	return res, err
}

// withLock calls fn holding an exclusive flock on path, or without one
// when path is empty.
func withLock(path string, stderr io.Writer, fn func() error) error {
	if path == "" {
		return fn()
	}
	start := time.Now()
	unlock, err := lockFile(path)
	if err != nil {
		return fmt.Errorf("-lock: %w", err)
	}
	fmt.Fprintf(stderr, "scale: %s locked after %v\n", path, time.Since(start).Round(time.Millisecond))
	return errors.Join(fn(), unlock())
}
