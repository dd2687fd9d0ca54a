package sidecar

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/migrate"
)

// CopyCommand returns the copy command, which copies a store from one
// backend to another with its history (package migrate):
//
//	state-sidecar copy [-namespace ns]... FROM_URL TO_URL
//
// FROM_URL and TO_URL are store URLs, as state.Open takes them:
// sqlite:///abs/path.db, redis://host:6379/0, postgres://..., s3://bucket/prefix,
// file:///abs/dir. Without -namespace it copies every namespace of a
// source that can name them (every built-in backend), else "default".
// Every target namespace must be empty. Stop the sidecars writing to the
// source first: the copy reads it as it goes. Progress goes to stderr, the
// summary to stdout.
func CopyCommand() Command {
	return Command{
		Name:  "copy",
		Usage: "copy [-namespace ns]... FROM_URL TO_URL   copy a store, history included, to another backend (such as sqlite:///a.db to s3://bucket/prefix)",
		Run:   runCopy,
	}
}

// namespaces is a repeatable -namespace flag.
type namespaces []string

func (n *namespaces) String() string { return strings.Join(*n, ",") }
func (n *namespaces) Set(v string) error {
	if err := checkNamespace(v); err != nil {
		return err
	}
	*n = append(*n, v)
	return nil
}

func runCopy(ctx context.Context, args []string, env Env) error {
	fs := flag.NewFlagSet(Name+" copy", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // -h is printed below, to stdout; errors are returned
	var nss namespaces
	fs.Var(&nss, "namespace", "a namespace to copy (repeatable); none: every namespace the source can name, else \"default\"")
	quiet := fs.Bool("quiet", false, "no progress on stderr")
	usage := func() {
		fs.SetOutput(env.Stdout)
		fmt.Fprintf(env.Stdout, "Usage: %s copy [-namespace ns]... [-quiet] FROM_URL TO_URL\n\n"+
			"Copies every live record and the history of each namespace from one store to another,\n"+
			"into empty namespaces. URLs as the store opens them: sqlite:///abs/path.db, redis://host:6379/0,\n"+
			"postgres://user@host/db, s3://bucket/prefix?endpoint=..., file:///abs/dir.\n\n", Name)
		fs.PrintDefaults()
	}
	var urls []string
	rest := args
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				usage()
				return err
			}
			return fmt.Errorf("%w: %v (-h lists the flags)", ErrConfig, err)
		}
		if fs.NArg() == 0 {
			break
		}
		urls = append(urls, fs.Arg(0)) // flags may follow the URLs too
		rest = fs.Args()[1:]
	}
	if len(urls) != 2 {
		return fmt.Errorf("%w: copy takes two store URLs, FROM and TO, got %d (-h says more)", ErrConfig, len(urls))
	}
	opts := &state.Options{SweepInterval: -1}
	from, err := state.DefaultURLMux().Open(ctx, urls[0], opts)
	if err != nil {
		return fmt.Errorf("opening the source %s: %w", redact(urls[0]), err)
	}
	defer from.Close()
	to, err := state.DefaultURLMux().Open(ctx, urls[1], opts)
	if err != nil {
		return fmt.Errorf("opening the target %s: %w", redact(urls[1]), err)
	}
	defer to.Close()
	mo := &migrate.Options{Namespaces: nss}
	if !*quiet {
		mo.Progress = func(msg string) { fmt.Fprintf(env.Stderr, "%s copy: %s\n", Name, msg) }
	}
	rep, err := migrate.Copy(ctx, from.Driver(), to.Driver(), mo)
	for _, n := range rep.Namespaces {
		rev := "its revisions start above the source's, so fences and versions only grow"
		if !n.RevisionsAbove {
			rev = fmt.Sprintf("its revisions are the target's own (the source's went up to %d): take leases again", n.MaxRevision)
		}
		fmt.Fprintf(env.Stdout, "namespace %q: %d records and %d history events copied; %s\n", n.Namespace, n.Records, n.Events, rev)
	}
	if err != nil {
		return err
	}
	for _, n := range rep.Namespaces {
		if n.Namespace == state.KeysNamespace {
			continue // an object store names the key table too: copied as it is
		}
		k, err := copyKeys(ctx, state.DriverKeyTable(from.Driver()), state.DriverKeyTable(to.Driver()), n.Namespace)
		if err != nil {
			return fmt.Errorf("namespace %q: copying its data keys: %w", n.Namespace, err)
		}
		if k > 0 {
			fmt.Fprintf(env.Stdout, "namespace %q: %d wrapped data key sets copied (the target needs the same STATE_ENCRYPTION_KEY_URL)\n", n.Namespace, k)
		}
	}
	fmt.Fprintf(env.Stdout, "Copied %s to %s.\n", redact(urls[0]), redact(urls[1]))
	return nil
}

// copyKeys copies the wrapped data key sets of namespace ns (its own and
// its subjects', encryption at rest) from one key table to another, as
// they are: records are copied sealed, and without their keys they could
// not be read. It returns how many it copied; a key set the target has
// already, the same, is not an error.
func copyKeys(ctx context.Context, from, to state.KeyTable, ns string) (int, error) {
	names, err := from.List(ctx, ns+"/")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range append([]string{ns}, names...) {
		v, _, err := from.Get(ctx, name)
		if errors.Is(err, state.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		ok, err := to.Put(ctx, name, v, 0)
		if err != nil {
			return n, err
		}
		if !ok {
			if cur, _, err := to.Get(ctx, name); err != nil || string(cur) != string(v) {
				return n, fmt.Errorf("the target has other data keys for %q", name)
			}
			continue
		}
		n++
	}
	return n, nil
}
