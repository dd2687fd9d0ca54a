package redisstate

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// Scheme is the URL scheme redisstate registers its URLOpener under; it
// registers "rediss" (TLS) too.
const Scheme = "redis"

// SchemeTLS is the URL scheme of Redis over TLS.
const SchemeTLS = "rediss"

func init() {
	state.Register(Scheme, new(URLOpener))
	state.Register(SchemeTLS, new(URLOpener))
}

// Timeouts Open gives a client whose URL does not set them: short enough
// that an outage is reported promptly, long enough for a busy server.
const (
	DefaultDialTimeout  = 2 * time.Second
	DefaultReadTimeout  = 3 * time.Second
	DefaultWriteTimeout = 3 * time.Second
	DefaultPoolTimeout  = 4 * time.Second
)

// URLOpener opens "redis://" and "rediss://" URLs with Open.
type URLOpener struct{}

var _ state.URLOpener = (*URLOpener)(nil)

// OpenDriverURL implements state.URLOpener.
func (*URLOpener) OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error) {
	return openURL(ctx, u)
}

// Open connects to the Redis a URL names and returns a driver that owns its
// client. The forms are those of go-redis (redis.ParseURL, and
// ParseClusterURL or ParseFailoverURL for the forms below), with these
// additions:
//
//   - prefix=<p> sets Options.Prefix;
//   - senders=<n> and max_batch=<n> set Options.Senders and
//     Options.MaxBatch (max_batch=1 turns batching off);
//   - cluster=true, or any addr=<host:port> parameter without master_name,
//     opens a Cluster client whose seed nodes are the host and the addrs;
//   - master_name=<name> opens a Sentinel failover client whose sentinels
//     are the host and the addrs.
//
// Unless the URL says otherwise, the client fails a dial after
// DefaultDialTimeout, a read after DefaultReadTimeout, a write after
// DefaultWriteTimeout and a wait for a pooled connection after
// DefaultPoolTimeout; it honours the deadline of every call's context; and
// it does not re-send commands (max_retries=-1), since a write script sent
// twice would be applied twice. Open checks that the server answers.
func Open(ctx context.Context, rawURL string) (*Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisstate: cannot parse the URL: %w", err)
	}
	return openURL(ctx, u)
}

func openURL(ctx context.Context, u *url.URL) (*Driver, error) {
	if u.Scheme != Scheme && u.Scheme != SchemeTLS {
		return nil, fmt.Errorf("redisstate: URL scheme must be redis or rediss, got %q", u.Scheme)
	}
	q := u.Query()
	opts := &Options{Prefix: q.Get("prefix"), CloseClient: true}
	if q.Has("prefix") && opts.Prefix == "" {
		return nil, fmt.Errorf("redisstate: URL parameter prefix must not be empty")
	}
	for _, p := range []struct {
		name string
		dst  *int
	}{{"senders", &opts.Senders}, {"max_batch", &opts.MaxBatch}} {
		if q.Has(p.name) {
			n, err := strconv.Atoi(q.Get(p.name))
			if err != nil || n < 1 {
				return nil, fmt.Errorf("redisstate: URL parameter %s must be a positive integer, got %q", p.name, q.Get(p.name))
			}
			*p.dst = n
		}
		q.Del(p.name)
	}
	cluster := false
	if q.Has("cluster") {
		var err error
		if cluster, err = strconv.ParseBool(q.Get("cluster")); err != nil {
			return nil, fmt.Errorf("redisstate: URL parameter cluster must be true or false, got %q", q.Get("cluster"))
		}
	}
	sentinel := q.Has("master_name")
	if q.Has("addr") && !sentinel {
		cluster = true
	}
	if cluster && sentinel {
		return nil, fmt.Errorf("redisstate: URL parameters cluster and master_name exclude each other")
	}
	retries := q.Has("max_retries")
	q.Del("prefix")
	q.Del("cluster")
	rest := *u
	rest.RawQuery = q.Encode()
	rdb, err := newClient(rest.String(), cluster, sentinel, retries)
	if err != nil {
		return nil, fmt.Errorf("redisstate: %w", err)
	}
	d, err := New(ctx, rdb, opts)
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("%w (%s)", err, redacted(u))
	}
	return d, nil
}

// newClient makes the go-redis client for a URL stripped of our parameters.
func newClient(rawURL string, cluster, sentinel, retries bool) (redis.UniversalClient, error) {
	switch {
	case cluster:
		o, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			return nil, err
		}
		tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries, retries)
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), nil
	case sentinel:
		o, err := redis.ParseFailoverURL(rawURL)
		if err != nil {
			return nil, err
		}
		tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries, retries)
		o.ContextTimeoutEnabled = true
		return redis.NewFailoverClient(o), nil
	default:
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries, &o.DialerRetries, retries)
		o.ContextTimeoutEnabled = true
		return redis.NewClient(o), nil
	}
}

// tune applies Open's defaults to the fields of any kind of client options:
// the timeouts the URL left unset, no command retries unless the URL set
// max_retries, and a single dial retry.
func tune(dial, read, write, pool *time.Duration, maxRetries, dialRetries *int, retriesSet bool) {
	*dial = or(*dial, DefaultDialTimeout)
	*read = or(*read, DefaultReadTimeout)
	*write = or(*write, DefaultWriteTimeout)
	*pool = or(*pool, DefaultPoolTimeout)
	if !retriesSet {
		*maxRetries = -1
	}
	if *dialRetries == 0 {
		*dialRetries = 2
	}
}

// or returns v, or def when v is unset (0).
func or(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// redacted returns the URL without its password, for error messages.
func redacted(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	return c.Redacted()
}
