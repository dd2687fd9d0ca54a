// Package filestate is the directory backend of package state: the store
// is a directory of JSON files that several processes on one machine can
// share, with no server, and that a person can read (docs/backends-object.md
// describes every file).
//
// It is package objstate's design on a directory: each namespace has a
// head file (ns/<namespace>/head.json) holding its newest commits, segment
// files holding older ones and snapshot files holding its whole state as
// of one commit; see package objstate for how commits, caches and
// snapshots work and what they cost. A file is written to a temporary
// file, flushed to the disk (unless Options.NoSync) and renamed into
// place, so readers see whole files; a head is replaced holding an
// exclusive flock(2) on its lock file (under .locks/), after checking that
// it is still the one the writer read. The kernel releases a lock when its
// process dies, so a crashed process blocks no one. Expiry follows the
// machine's clock, which every process sharing the directory reads.
//
// The directory must be on a local file system: flock is not reliable on
// every network file system.
//
// It registers the "file" URL scheme: "file:///abs/dir" or
// "file:relative/dir", with the optional query parameter fsync (true, the
// default, or false).
package filestate

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/objstate"
)

// Options configure Open. A nil *Options means defaults.
type Options struct {
	// NoSync skips flushing files to the disk before they are renamed into
	// place: writes are faster, and a write that returned survives a crash
	// of its process but may be lost, with those after it, if the machine
	// loses power.
	NoSync bool
	// Driver tunes the object-store driver; a Prefix puts the store in a
	// subdirectory ("team-a/").
	Driver objstate.Options
}

// Open opens (creating it if needed) the store in directory dir.
func Open(ctx context.Context, dir string, opts *Options) (*objstate.Driver, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if dir == "" {
		return nil, fmt.Errorf("filestate: the directory must be given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filestate: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("filestate: %w", err)
	}
	m := &medium{dir: abs, fsync: !o.NoSync}
	m.cleanTemp()
	writeReadme(abs)
	return objstate.New(m, &o.Driver)
}

// readme is what README.txt at the top of a store's directory says.
const readme = `This directory is a state store (github.com/statesidecar/state, backend "file").
Open it with state.Open(ctx, "file://<this directory>") or STATE_BACKEND=file.

ns/<namespace>/head.json       the namespace's newest commits, one JSON line each, and
                               which snapshot and segments hold the rest
ns/<namespace>/seg/*.json      older commits, oldest first
ns/<namespace>/snap/*/*.jsonl  the whole namespace as of one commit: one record per
                               line, then one history event per line
.locks/, .tmp/                 lock files and files being written

Do not edit these files while a process uses the store. The files are replaced,
never edited in place: a copy of the directory taken while no one writes is a backup.
`

// writeReadme writes README.txt unless it is there.
func writeReadme(dir string) {
	p := filepath.Join(dir, "README.txt")
	if _, err := os.Stat(p); err == nil {
		return
	}
	_ = os.WriteFile(p, []byte(readme), 0o644)
}

// Scheme is the URL scheme filestate registers its URLOpener under.
const Scheme = "file"

func init() { state.Register(Scheme, URLOpener{}) }

// URLOpener opens "file:///abs/dir" and "file:relative/dir" URLs. The
// query parameter fsync (true or false) sets Options.NoSync's opposite;
// others are rejected.
type URLOpener struct{}

var _ state.URLOpener = URLOpener{}

// OpenDriverURL implements state.URLOpener.
func (URLOpener) OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error) {
	dir := u.Path
	if u.Opaque != "" {
		dir = u.Opaque
	}
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("filestate: URL %q names a host; use file:///absolute/dir or file:relative/dir", u.Redacted())
	}
	var o Options
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "fsync":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("filestate: URL parameter fsync must be true or false, got %q", v)
			}
			o.NoSync = !b
		default:
			return nil, fmt.Errorf("filestate: unknown URL parameter %q (known: fsync)", k)
		}
	}
	return Open(ctx, dir, &o)
}
