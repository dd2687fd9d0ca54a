// Package pgstate is the PostgreSQL backend of package state: several
// processes (sidecar replicas behind a load balancer) share one database,
// through pgx v5 and its pool, with no ORM.
//
// Every hot operation is one round trip: a point read is one SELECT; a
// commit (a Set with its history entry, a batch, any conditional write) is
// one call of a PL/pgSQL function that checks the conditions, draws a
// revision, appends the events and writes the records in the statement's
// own transaction; a lease acquire, renew or release (backend.Leaser) and a
// workflow claim or heartbeat (backend.Claimer) are one function call each
// that decides as package state does. A read-modify-write
// (backend.Updater, which checkpoints and releases use) is one transaction
// in two round trips: lock and read, then commit. The driver also sweeps
// expired records and old history (backend.Sweeper), keeps history within
// its cap as it is written (backend.HistoryTrimmer), tells package state
// the database's time (backend.ServerClock), whether it can write
// (backend.Pinger) and which server settings weaken the store
// (backend.ConfigChecker), and tells package state's waiters (Watch,
// WaitKey, WaitRun) of other processes' writes through LISTEN/NOTIFY
// (backend.Notifier, see Driver.Notify).
//
// # Batching
//
// Sets, lease calls and claims that a process makes at the same moment
// share round trips and transactions: at most Options.Writers calls of
// each kind are in flight, a call made while that many are waits, and the
// calls that waited go together when one returns, up to Options.MaxBatch
// in one pgx batch (one write, one transaction, one commit). A call made
// while fewer are in flight goes at once, so batching adds no latency; on
// a busy server it spares each call most of what a transaction costs
// beyond its statements. A batch holds one namespace's calls in the order
// of their keys' locks, answers its callers once it has committed, and
// when the server fails one of its statements sends each call again
// alone, so that a call's answer is the one it would get alone (see
// batcher).
//
// # Time
//
// When a store has no injected clock, package state hands the driver a zero
// time and every statement reads the database's clock (clock_timestamp(),
// as River's coalesce(@now, ...) pattern), so replicas on hosts with skewed
// clocks agree on expiry. An injected clock (tests) is passed down and used
// instead. Times are integer milliseconds throughout.
//
// # Revisions and locking
//
// Revisions (versions, fences) and history event ids count per namespace,
// from one sequence per namespace created on its first write: one tenant
// cannot watch another's write rate. A writer takes an advisory lock per key
// it reads or writes (in a fixed order, so writers never deadlock) before
// it draws its revision, so each key's revisions increase with its writes,
// while writers of different keys run in parallel and share the fsync of
// group commit. A sequence never goes back, not even on Reset, and is moved
// up to the commit's time in microseconds (the database clock's, or the
// injected clock's, so that revisions under an injected clock do not depend
// on when the code runs) whenever it falls 100 ms behind it: after a failover to a replica that missed the latest writes (or a
// restore from a backup), revisions continue above every revision handed
// out before, as long as the new primary's clock is not behind the old
// one's by more than the failover took.
//
// Counters (keys under backend.CounterPrefix, which package state writes with
// backend.OpAdd) would otherwise make every writer of a namespace that
// bumps one wait for the previous one's commit to be flushed. A commit that
// only adds to a counter takes its lock shared and adds to one of 32 shard
// rows, one that no other adder in flight writes; a read of a counter, or
// a write that conditions on it, puts or deletes it, takes its lock
// exclusively, waits for the adds in flight and sees the base and the
// shards as one record (see the counters table in migrations/001_init.sql).
//
// A workflow run's record keeps the fields a claim reads in columns of its
// own beside its JSON value (run_status, run_agent, ..., and where the
// JSON no claim changes starts), written by the commit and claim
// functions, so that a claim reads each directly and writes a new head
// before the unchanged rest (migrations/004_run_columns.sql). A run stored
// before schema version 4 has no such columns until it is next written:
// its first claim is package state's portable one (backend.ErrSkip).
//
// Expiry is data compared against the clock: expired records are invisible
// at once and physically removed by Sweep, which the store's background
// sweeper calls on every replica; one replica at a time sweeps a schema,
// and one at a time trims a namespace's history (pg_try_advisory_xact_lock):
// the others return at once.
//
// # Schema
//
// Tables and functions live in one schema (default "state"), created and
// migrated on Open from versioned SQL embedded in the package, under an
// advisory lock so that replicas starting together agree. Several
// deployments can share a database with schemas of their own. The driver
// keeps no session state (no SET, no session-level lock across calls), so
// it works behind PgBouncer in transaction pooling mode; PgBouncer before
// 1.21 also needs pgx not to create named prepared statements: add
// default_query_exec_mode=exec (or cache_describe) to the URL. LISTEN is
// the exception, as it needs a session: behind such a pooler give the
// listening connection a direct address (the listen URL parameter,
// Options.Listen), or waiters fall back to polling, which the driver
// detects.
//
// # History order
//
// Event ids are drawn before commit, so a later id may commit first.
// History (without a key) stops at the namespace's settled horizon, below
// every id still in flight: each writer announces a lower bound of its id
// in an advisory lock before it draws it, and a reader reads the sequence,
// then pg_locks, then the events (see the history function in
// migrations/001_init.sql). Watch and waiters, which follow history with a
// cursor, thus never pass an event that commits late
// (backend.OrderedHistory); ids are not consecutive.
//
// # URLs
//
// The package registers the "postgres" and "postgresql" schemes with package
// state (see URLOpener):
//
//	postgres://user:password@host:5432/db?sslmode=require&schema=agents&pool_max_conns=20
//
// Requires PostgreSQL 13 or later.
package pgstate

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
)

// DefaultSchema is the schema used when Options.Schema is empty.
const DefaultSchema = "state"

// DefaultTimeout bounds each round trip to the database of a driver made by
// Open, unless Options.Timeout says otherwise.
const DefaultTimeout = 30 * time.Second

// Options configure a Driver. A nil *Options means all defaults.
type Options struct {
	// Schema holds the driver's tables and functions; Open and New create
	// it when it does not exist. It is a letter or underscore followed by up
	// to 62 letters, digits or underscores. Defaults to "state".
	Schema string
	// Timeout bounds every round trip to the database, so that no call
	// waits forever on a database that stopped answering, whatever its
	// context: each request sent on a connection of the pool that Open
	// creates sets a deadline on the connection's socket (cheaper than a
	// context per call). A call's own context deadline still applies when it
	// is sooner. Defaults to DefaultTimeout; a negative value means no bound.
	// Only Open uses it: with New, the pool is the caller's to configure.
	Timeout time.Duration
	// Listen says how Notify (backend.Notifier) listens for other
	// processes' writes: "" on a connection of its own to the pool's
	// server, "off" not at all (waiters then poll, every
	// state.Options.WaitPollInterval), anything else on a connection of
	// its own to this connection string. LISTEN needs a session: behind
	// PgBouncer in transaction pooling mode, give the database's direct
	// address (or one pooled in session mode) here. Notify finds out when
	// notifications do not arrive and falls back to polling; Listen only
	// spares it the two seconds it takes to find out.
	Listen string
	// Writers is how many sets, lease calls and claims (each kind
	// counted apart) the driver sends at once. A call made while that many
	// of its kind are in flight waits for one of them to return, and the
	// calls that waited go together then, up to MaxBatch in one round trip
	// and one transaction (see Driver). Defaults to half the pool's
	// maximum size (pool_max_conns), at least 1, so that a burst of one
	// kind leaves connections to reads and other writes.
	Writers int
	// MaxBatch is the most calls of one kind that the driver sends
	// together (see Writers). 1 sends every call alone, as soon as a
	// connection is free. Defaults to DefaultMaxBatch.
	MaxBatch int
	// ClosePool makes Close close the pool too. Defaults to false: the caller
	// owns the pool it passed to New. Open sets it.
	ClosePool bool
}

// Driver is a backend.Driver over PostgreSQL. It is safe for concurrent use.
// Create one with Open or New.
type Driver struct {
	pool     *pgxpool.Pool
	schema   string
	q        queries
	own      bool
	listen   *pgx.ConnConfig // Options.Listen's; nil: the pool's
	nolisten bool            // Options.Listen is "off"
	channel  string          // the schema's notification channel
	counters string          // the prefix of counter keys (see Driver.counter)
	claims   *batcher[*claimCall, *claimOut]
	sets     *batcher[[]any, setOut]
	leases   *batcher[[]any, leaseOut]
}

var (
	_ backend.Driver      = (*Driver)(nil)
	_ backend.Updater     = (*Driver)(nil)
	_ backend.Leaser      = (*Driver)(nil)
	_ backend.Sweeper     = (*Driver)(nil)
	_ backend.ServerClock = (*Driver)(nil)

	_ backend.HistoryTrimmer = (*Driver)(nil)
	_ backend.Pinger         = (*Driver)(nil)
	_ backend.ConfigChecker  = (*Driver)(nil)
	_ backend.Claimer        = (*Driver)(nil)
	_ backend.Notifier       = (*Driver)(nil)
	_ backend.OrderedHistory = (*Driver)(nil)
)

var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// New returns a driver over pool. It checks that the database answers and
// brings the schema up to date, within ctx. The caller owns pool unless
// opts.ClosePool is set.
func New(ctx context.Context, pool *pgxpool.Pool, opts *Options) (*Driver, error) {
	if pool == nil {
		return nil, errors.New("pgstate: New called with a nil pool")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if !schemaName.MatchString(o.Schema) {
		return nil, fmt.Errorf("pgstate: schema %q must be a letter or underscore followed by up to 62 letters, digits or underscores", o.Schema)
	}
	d := &Driver{pool: pool, schema: o.Schema, q: newQueries(o.Schema), own: o.ClosePool,
		nolisten: o.Listen == listenOff, channel: channelOf(o.Schema), counters: backend.CounterPrefix}
	if o.Writers < 0 || o.MaxBatch < 0 {
		return nil, fmt.Errorf("pgstate: Options.Writers and MaxBatch must not be negative (0 means the default)")
	}
	if o.Writers == 0 {
		o.Writers = max(int(pool.Config().MaxConns)/2, 1)
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	d.claims = newBatcher(d, batchKind[*claimCall, *claimOut](claimKind{d}), o.Writers, o.MaxBatch)
	d.claims.lockFirst = true
	d.sets = newBatcher(d, batchKind[[]any, setOut](stmtKind[setOut]{d.q.set, readSet}), o.Writers, o.MaxBatch)
	d.leases = newBatcher(d, batchKind[[]any, leaseOut](stmtKind[leaseOut]{d.q.lease, readLease}), o.Writers, o.MaxBatch)
	if o.Listen != "" && o.Listen != listenOff {
		cfg, err := pgx.ParseConfig(o.Listen)
		if err != nil {
			return nil, fmt.Errorf("pgstate: Options.Listen (URL parameter listen) cannot be used: %s", parseProblem(err))
		}
		d.listen = cfg
	}
	if err := pool.Ping(ctx); err != nil {
		return nil, d.fail(ctx, "connecting to PostgreSQL", err)
	}
	if err := migrate(ctx, pool, o.Schema); err != nil {
		return nil, d.fail(ctx, "opening schema "+o.Schema, err)
	}
	return d, nil
}

// Open connects to the database of connString (a postgres:// URL or a
// key=value string, as pgxpool.ParseConfig reads it, pool_max_conns and
// the other pool settings included) and returns a driver that owns the
// pool. A URL may also carry the driver's own parameters, schema, timeout,
// listen, writers and max_batch (see URLOpener), for the fields opts
// leaves zero.
func Open(ctx context.Context, connString string, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if u, err := url.Parse(connString); err == nil && (u.Scheme == Scheme || u.Scheme == AltScheme) {
		rest, own, err := ownParams(u)
		if err != nil {
			return nil, err
		}
		connString = rest.String()
		if o.Schema == "" {
			o.Schema = own.Schema
		}
		if o.Timeout == 0 {
			o.Timeout = own.Timeout
		}
		if o.Listen == "" {
			o.Listen = own.Listen
		}
		if o.Writers == 0 {
			o.Writers = own.Writers
		}
		if o.MaxBatch == 0 {
			o.MaxBatch = own.MaxBatch
		}
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstate: the connection string cannot be used: %s", parseProblem(err))
	}
	return openConfig(ctx, cfg, &o)
}

func openConfig(ctx context.Context, cfg *pgxpool.Config, opts *Options) (*Driver, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ClosePool = true
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout > 0 {
		boundConns(cfg, o.Timeout)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstate: %w", err)
	}
	d, err := New(ctx, pool, &o)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return d, nil
}

// parseProblem says what is wrong with a connection string without
// repeating it: it may hold a password. pgx's error quotes the string
// (with the password masked, on a best-effort basis) and then says what is
// wrong; a *url.Error quotes the URL whole, so only its cause is kept.
func parseProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		if s := pe.Error(); strings.Contains(s, "`: ") {
			return s[strings.LastIndex(s, "`: ")+3:]
		}
		return "it is not a valid URL or key=value string"
	}
	return err.Error()
}

// Name returns "postgres".
func (d *Driver) Name() string { return "postgres" }

// Pool returns the pool the driver uses, for sharing it with other code.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Schema returns the driver's schema.
func (d *Driver) Schema() string { return d.schema }

// Close closes the driver's pool if the driver owns it (waiting for the
// calls in flight to return their connections). Package state calls
// nothing after Close (see package backend); a pool closed here refuses
// calls made directly, with pgx's error.
func (d *Driver) Close() error {
	if d.own {
		d.pool.Close()
	}
	return nil
}

// fail wraps the error of operation op. When ctx has ended, the error
// matches ctx's error too. The text names the server's address when pgx's
// does, never a password: pgx leaves passwords out of its errors.
func (d *Driver) fail(ctx context.Context, op string, err error) error {
	cerr := backend.Ended(ctx)
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("pgstate: %s: %w (%w)", op, err, cerr)
	}
	var ne net.Error
	if cerr == nil && errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("pgstate: %s: %w (the database did not answer in time)", op, err)
	}
	return fmt.Errorf("pgstate: %s: %w", op, err)
}

// The advisory locks of the driver's schema: 64-bit hashes of the schema, a
// kind and a name. Two locks sharing a hash only wait for each other.
const (
	lockOfKey byte = iota
	lockOfNS
	lockOfSweep
	lockOfTrim
)

// lock returns the advisory lock of kind on name (and key, for lockOfKey).
func (d *Driver) lock(kind byte, name string, key ...string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(d.schema))
	_, _ = h.Write([]byte{kind})
	_, _ = h.Write([]byte(name))
	for _, k := range key {
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(k))
	}
	return int64(h.Sum64())
}

// lockKey returns the advisory lock of key in namespace ns of the schema:
// writers of a key hold it, so that they draw its revisions in turn.
func (d *Driver) lockKey(ns, key string) int64 { return d.lock(lockOfKey, ns, key) }

// nsLock returns the advisory lock of namespace ns: writers hold it shared,
// Reset and writers touching many keys exclusively.
func (d *Driver) nsLock(ns string) int64 { return d.lock(lockOfNS, ns) }

// sweepLock returns the advisory lock held by the process sweeping the
// schema.
func (d *Driver) sweepLock() int64 { return d.lock(lockOfSweep, "sweep") }

// trimLock returns the advisory lock held by the process trimming the
// history of namespace ns.
func (d *Driver) trimLock(ns string) int64 { return d.lock(lockOfTrim, ns) }

// nowArg encodes a time for a statement: Unix ms, or NULL for the
// database's clock.
func nowArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// timeOf returns the time a statement was evaluated at: given (kept as
// given) or the database's, from its Unix ms.
func timeOf(given time.Time, ms int64) time.Time {
	if !given.IsZero() {
		return given
	}
	return time.UnixMilli(ms).UTC()
}

// ttlMs converts a TTL to whole milliseconds, rounding a positive TTL below
// 1ms up so that it still expires.
func ttlMs(ttl time.Duration) int64 {
	ms := ttl.Milliseconds()
	if ttl > 0 && ms == 0 {
		ms = 1
	}
	return ms
}

// msTime converts Unix milliseconds to a UTC time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
