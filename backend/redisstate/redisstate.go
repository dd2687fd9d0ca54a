// Package redisstate is the Redis backend of package state: several processes
// (sidecar replicas behind a load balancer) share one Redis, standalone,
// Sentinel or Cluster, through go-redis v9.
//
// Every write is one Lua script, so it is atomic and costs one round trip:
// the generic commit of backend.Driver and the native fast paths for
// workflow claims (backend.Claimer) and leases (backend.Leaser). Reads are
// one round trip too. The driver also sweeps expired records and old history
// (backend.Sweeper) and tells package state the server's time
// (backend.ServerClock).
//
// # Time
//
// When a store has no injected clock, package state hands the driver a zero
// time and every script reads Redis's own clock (TIME), so replicas on hosts
// with skewed clocks agree on expiry. An injected clock (tests) is passed
// down and used instead. Times are integer milliseconds throughout.
//
// # Keys
//
// All keys of one namespace share the hash tag "{<prefix>:<namespace>}", so
// a script touches one Cluster slot and namespaces spread over the masters.
// A record is one string, a small binary header (revisions, times, writer
// length) followed by the writer and the value, so reading it is a GET and
// writing it a SET. A workflow run's value is stored packed (runs.go): the
// fields a claim reads as fields, so that the claim script reads them with
// one struct.unpack, then the rest of the run's JSON; the driver gives it
// back as the run's JSON. A lexicographic sorted set of record keys serves prefix
// listing and counting, and a sorted set by expiry serves sweeping. History
// is a list of packed events in append order, whose positions give the
// event ids, with a list of event ids per key (lua/base.lua lists every
// key). Nothing on a request path uses KEYS or SCAN.
//
// The hot operations (Get, Set, ClaimRun, Lease) have scripts of their own
// that do nothing they do not need, and every redis.call and every helper a
// script defines costs: Get reads Redis's clock only for a record that can
// expire, and Set, the commonest commit (one put and its own history
// event), skips the generic commit's bookkeeping. The Gets, claims and
// lease calls of one namespace that wait at the same moment share one
// script call (batch.go, Options.Senders and MaxBatch), so that concurrent
// callers share a script's start and its reads and writes of the
// namespace's counters, history list and channel.
//
// Revisions (versions, fences) and event ids count per namespace: a global
// counter would put every namespace in one slot. The revision counter and
// the count of events ever removed (which event ids start after) never
// expire and survive Reset. A fresh revision counter, that of a new
// namespace or one Redis lost (a restart without persistence, an eviction),
// starts from Redis's clock in microseconds rather than from zero, so fences
// and versions stay above every one handed out before the loss, provided
// Redis's clock does not step back and the namespace averaged under one
// write per microsecond. A partial loss that restores an older counter (an
// RDB snapshot, the last second of an AOF with appendfsync everysec, a
// failover to a lagging replica) can still hand out the revisions of the lost
// writes again: where fences must hold across crashes, run Redis with
// appendonly yes and appendfsync always, and maxmemory-policy noeviction.
// CheckConfig (which package state calls when a store starts, logging what
// it finds) warns when Redis persists nothing or may evict keys.
//
// Expiry is data compared against the clock, not Redis TTLs: expired
// records are invisible at once and physically removed by Sweep, which the
// store's background sweeper calls every minute by default (on every
// replica; sweeping twice is harmless). The namespaces Sweep visits are
// listed in the set "{<prefix>}:namespaces", added to by a driver the first
// time it writes to a namespace: that first write costs one SADD more.
//
// # URLs
//
// The package registers the "redis" and "rediss" schemes with package state
// (see URLOpener):
//
//	redis://user:password@host:6379/0?namespace=app
//	rediss://host:6380?prefix=agents
//	redis://host1:7000?addr=host2:7000&addr=host3:7000           (Cluster)
//	redis://sentinel1:26379?master_name=mymaster&addr=sentinel2:26379 (Sentinel)
//
// Requires Redis 6.2 or later (Redis 7 recommended).
package redisstate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

// DefaultPrefix is the key prefix used when Options.Prefix is empty.
const DefaultPrefix = "state"

// Options configure a Driver. A nil *Options means all defaults.
type Options struct {
	// Prefix starts every key the driver writes, so that several stores (or
	// other applications) can share one Redis database. It must not contain
	// '{' or '}'. Defaults to "state".
	Prefix string
	// CloseClient makes Close close the client too. Defaults to false: the
	// caller owns the client it passed to New. Open sets it.
	CloseClient bool
	// Senders is how many script calls of Gets, of claims and of lease
	// calls (each kind counted apart) the driver has in flight at once. A
	// call made while that many of its kind are in flight waits for one of
	// them to return, and the calls that waited go together then, up to
	// MaxBatch in one script call (see batch.go). Defaults to
	// DefaultSenders.
	Senders int
	// MaxBatch is the most Gets, claims, or lease calls that the driver
	// sends in one script call (see Senders). 1 sends every call alone.
	// Defaults to DefaultMaxBatch.
	MaxBatch int
}

// Driver is a backend.Driver over Redis. It is safe for concurrent use. Create
// one with New or Open.
type Driver struct {
	rdb      redis.UniversalClient
	prefix   string
	registry string // the set of namespaces this prefix has written to
	own      bool
	known    sync.Map // namespaces known to be in the registry

	gets   *batcher[string, backend.Record]
	claims *batcher[*backend.ClaimQuery, backend.ClaimResult]
	leases *batcher[*backend.LeaseQuery, backend.LeaseResult]
}

var (
	_ backend.Driver      = (*Driver)(nil)
	_ backend.Claimer     = (*Driver)(nil)
	_ backend.Leaser      = (*Driver)(nil)
	_ backend.Sweeper     = (*Driver)(nil)
	_ backend.ServerClock = (*Driver)(nil)

	_ backend.HistoryTrimmer = (*Driver)(nil)
)

// New returns a driver over rdb, which may be a *redis.Client, a
// *redis.ClusterClient or a Sentinel failover client. It checks that the
// server answers and loads the driver's scripts, within ctx. The caller owns
// rdb unless opts.CloseClient is set.
//
// Configure rdb with ContextTimeoutEnabled so that calls respect their
// context's deadline, and with MaxRetries -1: go-redis otherwise re-sends a
// command whose reply was lost, and a write script sent twice is applied
// twice. Open does both. A context cancelled without a deadline is noticed
// before a command is sent; once it is sent, go-redis waits for the reply up
// to the client's read timeout.
func New(ctx context.Context, rdb redis.UniversalClient, opts *Options) (*Driver, error) {
	if rdb == nil {
		return nil, errors.New("redisstate: New called with a nil client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return nil, fmt.Errorf("redisstate: prefix %q must not contain '{' or '}' (they delimit the hash tag)", o.Prefix)
	}
	if o.Senders < 0 || o.MaxBatch < 0 {
		return nil, errors.New("redisstate: Options.Senders and MaxBatch must not be negative (0 means the default)")
	}
	if o.Senders == 0 {
		o.Senders = DefaultSenders
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	d := &Driver{rdb: rdb, prefix: o.Prefix, registry: "{" + o.Prefix + "}:namespaces", own: o.CloseClient}
	d.gets = &batcher[string, backend.Record]{d: d, script: getScript, args: getArgs,
		reply: getReply, op: "get", limit: o.Senders, max: o.MaxBatch}
	d.claims = &batcher[*backend.ClaimQuery, backend.ClaimResult]{d: d, script: claimScript, one: claimOneScript,
		args: claimArgs, reply: claimReply, op: "claim", limit: o.Senders, max: o.MaxBatch}
	d.leases = &batcher[*backend.LeaseQuery, backend.LeaseResult]{d: d, script: leaseScript, one: leaseOneScript,
		args: leaseArgs, reply: leaseReply, op: "lease", limit: o.Senders, max: o.MaxBatch}
	if err := d.load(ctx); err != nil {
		return nil, fmt.Errorf("redisstate: connecting to Redis: %w", err)
	}
	return d, nil
}

// load checks that the server answers and loads every script, so that the
// first EVALSHA of each does not miss. On a Cluster, SCRIPT LOAD reaches
// every master.
func (d *Driver) load(ctx context.Context) error {
	if err := d.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	for _, s := range allScripts {
		if err := s.Load(ctx, d.rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Name returns "redis".
func (d *Driver) Name() string { return "redis" }

// Client returns the client the driver uses, for sharing its connection
// pool with other drivers (New with another Prefix) or other code.
func (d *Driver) Client() redis.UniversalClient { return d.rdb }

// Prefix returns the driver's key prefix.
func (d *Driver) Prefix() string { return d.prefix }

// Close closes the driver's client if the driver owns it. Package state
// calls nothing after Close (see package backend): the driver keeps no
// state of its own to guard.
func (d *Driver) Close() error {
	if d.own {
		if err := d.rdb.Close(); err != nil {
			return fmt.Errorf("redisstate: closing the client: %w", err)
		}
	}
	return nil
}

// ServerTime implements backend.ServerClock: it returns Redis's clock (TIME).
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	t, err := d.rdb.Time(ctx).Result()
	if err != nil {
		return time.Time{}, d.fail(ctx, "time", err)
	}
	return t.UTC(), nil
}

// fail wraps the error of operation op. When ctx has ended, the error
// matches ctx's error too: go-redis reports a passed deadline as a network
// timeout.
func (d *Driver) fail(ctx context.Context, op string, err error) error {
	cerr := backend.Ended(ctx)
	if cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("redisstate: %s: %w (%w)", op, err, cerr)
	}
	return fmt.Errorf("redisstate: %s: %w", op, err)
}

// base returns the key prefix, hash tag included, of namespace ns.
func (d *Driver) base(ns string) string { return "{" + d.prefix + ":" + ns + "}" }

// touch adds ns to the registry of namespaces that Sweep visits, once per
// driver and namespace, before the first write.
func (d *Driver) touch(ctx context.Context, ns string) error {
	if _, ok := d.known.Load(ns); ok {
		return nil
	}
	if err := d.rdb.SAdd(ctx, d.registry, ns).Err(); err != nil {
		return d.fail(ctx, "registering namespace "+ns, err)
	}
	d.known.Store(ns, struct{}{})
	return nil
}

// nowArg encodes a time for a script: Unix ms, or "" for Redis's clock.
func nowArg(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return itoa(t.UnixMilli())
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
