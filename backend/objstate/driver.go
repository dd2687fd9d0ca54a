package objstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/statesidecar/state/backend"
)

// Options configure a Driver. A nil *Options means defaults.
type Options struct {
	// Prefix is where the store lives in the medium: every object's key
	// starts with it. "" (the whole medium) or a path ending in "/".
	Prefix string
	// TailBytes is how many bytes of commits a head holds itself before
	// the next commit moves them to a segment object. A larger tail means
	// fewer segment writes and a larger head to write each commit.
	// Defaults to 32 KiB.
	TailBytes int
	// MaxSegments is how many segments of one level (size) in a row a
	// head names before they are merged into one segment of the next
	// level, in the background: a commit is rewritten once per level, and
	// a head names at most about MaxSegments segments per level. Defaults
	// to 8.
	MaxSegments int
	// SnapshotMinBytes is the least log (segments and the head's commits)
	// that makes a new snapshot worth writing; a snapshot is written when
	// the log reaches half the last snapshot's size or this, whichever is
	// more, so that writing snapshots costs at most about twice writing
	// the log. Defaults to 1 MiB.
	SnapshotMinBytes int
	// SnapshotPartBytes is the size of one part of a snapshot. Defaults to
	// 4 MiB.
	SnapshotPartBytes int
	// RequestTimeout bounds one request to the medium. Defaults to 30 s.
	RequestTimeout time.Duration
	// CommitTimeout bounds a group commit, retries included, for calls
	// without a deadline of their own. Defaults to 1 minute.
	CommitTimeout time.Duration
	// OrphanGrace is how old an object no head names must be before a
	// sweep deletes it: longer than any writer takes between writing a
	// segment or snapshot and the head that names it. Defaults to 1 hour.
	OrphanGrace time.Duration
	// MaxGroup caps the calls committed together. Defaults to 512.
	MaxGroup int
}

func (o *Options) withDefaults() (Options, error) {
	var r Options
	if o != nil {
		r = *o
	}
	if r.Prefix != "" && !strings.HasSuffix(r.Prefix, "/") {
		return r, fmt.Errorf("objstate: Options.Prefix %q must end in /", r.Prefix)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&r.TailBytes, 32<<10)
	def(&r.MaxSegments, 8)
	def(&r.SnapshotMinBytes, 1<<20)
	def(&r.SnapshotPartBytes, 4<<20)
	def(&r.MaxGroup, 512)
	defd(&r.RequestTimeout, 30*time.Second)
	defd(&r.CommitTimeout, time.Minute)
	defd(&r.OrphanGrace, time.Hour)
	return r, nil
}

// Driver is a backend.Driver over a Medium. Create one with New.
type Driver struct {
	m    Medium
	opts Options
	life context.Context // ended by Close
	stop context.CancelFunc

	mu     sync.Mutex
	closed bool
	spaces map[string]*space
	wg     sync.WaitGroup // leaders and compactions
	// jobs counts the compaction jobs running, in every namespace; idle
	// is closed while there are none (compact.go).
	jobs int
	idle chan struct{}
}

var (
	_ backend.Driver             = (*Driver)(nil)
	_ backend.Updater            = (*Driver)(nil)
	_ backend.Sweeper            = (*Driver)(nil)
	_ backend.HistoryTrimmer     = (*Driver)(nil)
	_ backend.ServerClock        = (*Driver)(nil)
	_ backend.ConsecutiveHistory = (*Driver)(nil)
)

// New returns a driver over m; opts may be nil. The driver owns m from
// then on: Close closes it.
func New(m Medium, opts *Options) (*Driver, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	return &Driver{m: m, opts: o, life: life, stop: stop, spaces: map[string]*space{}}, nil
}

// Name returns the medium's name, such as "s3" or "file".
func (d *Driver) Name() string { return d.m.Name() }

// Medium returns the driver's medium.
func (d *Driver) Medium() Medium { return d.m }

// Prefix returns Options.Prefix.
func (d *Driver) Prefix() string { return d.opts.Prefix }

// space returns the namespace ns, after checking ctx and Close.
func (d *Driver) space(ctx context.Context, ns string) (*space, error) {
	if err := backend.Ended(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, backend.ErrClosed
	}
	s := d.spaces[ns]
	if s == nil {
		s = newSpace(d, ns)
		d.spaces[ns] = s
	}
	return s, nil
}

// start runs fn in a goroutine Close waits for, unless the driver is
// closed.
func (d *Driver) start(fn func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		fn()
	}()
	return true
}

// Close implements backend.Driver: calls in flight end with ErrClosed.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return backend.ErrClosed
	}
	d.closed = true
	d.mu.Unlock()
	d.stop()
	d.wg.Wait()
	return d.m.Close()
}

// closedErr returns ErrClosed once the driver is closed, else err.
func (d *Driver) closedErr(err error) error {
	if d.life.Err() != nil {
		return backend.ErrClosed
	}
	return err
}

// read, write and del are the medium's calls, each bounded by
// RequestTimeout: a request that runs out of it while ctx goes on failed
// transiently (a write may have been carried out).
func (d *Driver) read(ctx context.Context, key, ifNoneMatch string) (Object, error) {
	rctx, cancel := context.WithTimeout(ctx, d.opts.RequestTimeout)
	defer cancel()
	obj, err := d.m.Read(rctx, d.opts.Prefix+key, ifNoneMatch)
	return obj, timedOut(ctx, rctx, err)
}

func (d *Driver) write(ctx context.Context, key string, b []byte, c Cond) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, d.opts.RequestTimeout)
	defer cancel()
	tag, err := d.m.Write(rctx, d.opts.Prefix+key, b, c)
	return tag, timedOut(ctx, rctx, err)
}

func (d *Driver) del(ctx context.Context, key string) error {
	rctx, cancel := context.WithTimeout(ctx, d.opts.RequestTimeout)
	defer cancel()
	return timedOut(ctx, rctx, d.m.Delete(rctx, d.opts.Prefix+key))
}

func timedOut(ctx, rctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && rctx.Err() != nil && !errors.Is(err, ErrTransient) {
		return fmt.Errorf("%w: the request ran out of time: %w", ErrTransient, err)
	}
	return err
}

// now returns the medium's clock to the millisecond.
func (d *Driver) now() time.Time { return d.m.Now().UTC().Truncate(time.Millisecond) }

// ServerTime implements backend.ServerClock: the medium's clock, which
// every process sharing the store agrees on.
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	if err := backend.Ended(ctx); err != nil {
		return time.Time{}, err
	}
	return d.now(), nil
}

// ConsecutiveHistory implements backend.ConsecutiveHistory: event ids
// count up by one per namespace in log order, and a reader sees a prefix
// of the log.
func (d *Driver) ConsecutiveHistory() bool { return true }

// OrderedHistory implements backend.OrderedHistory.
func (d *Driver) OrderedHistory() bool { return true }

// newID returns 16 random hex digits.
func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nsDir returns the key prefix of namespace ns: ns/<ns>/ when ns is a
// plain name, ns/~<hex>/ otherwise.
func nsDir(ns string) string {
	plain := ns != "" && len(ns) <= 128 && ns[0] != '.' && ns[0] != '~'
	for i := 0; plain && i < len(ns); i++ {
		c := ns[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
	}
	if plain {
		return "ns/" + ns + "/"
	}
	return "ns/~" + hex.EncodeToString([]byte(ns)) + "/"
}

// errOutcomeUnknown is wrapped by the error of a commit that may or may
// not have been applied.
var errOutcomeUnknown = errors.New("objstate: the commit's outcome is unknown")
