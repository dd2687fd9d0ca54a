package pgstate

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// The URL schemes pgstate registers its URLOpener under.
const (
	Scheme    = "postgres"
	AltScheme = "postgresql"
)

func init() {
	state.Register(Scheme, URLOpener{})
	state.Register(AltScheme, URLOpener{})
}

// URLOpener opens "postgres://" and "postgresql://" URLs. It takes these
// query parameters of its own:
//
//	schema     Options.Schema (default "state")
//	timeout    Options.Timeout, a Go duration such as 10s (default 30s)
//	listen     Options.Listen: off, or a connection string (URL-escaped) for
//	           the connection that listens for changes; behind PgBouncer in
//	           transaction pooling mode, the database's direct address
//	writers    Options.Writers (default half of pool_max_conns)
//	max_batch  Options.MaxBatch (default 16; 1 turns batching off)
//
// and hands the rest of the URL to pgxpool.ParseConfig, so libpq's
// parameters (sslmode, connect_timeout, application_name...), pgx's
// (default_query_exec_mode: exec or cache_describe behind PgBouncer before
// 1.21) and pgxpool's (pool_max_conns, pool_min_conns...) work as they
// document. A parameter none of them knows is sent to the server as a
// setting, which refuses one it does not know: the open fails, naming it.
type URLOpener struct{}

var _ state.URLOpener = URLOpener{}

// OpenDriverURL implements state.URLOpener.
func (URLOpener) OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error) {
	rest, o, err := ownParams(u)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(rest.String())
	if err != nil {
		return nil, fmt.Errorf("pgstate: the URL cannot be used: %s", parseProblem(err))
	}
	return openConfig(ctx, cfg, &o)
}

// ownParams takes the driver's own parameters (schema, timeout, listen,
// writers, max_batch) out of u,
// returning the rest of the URL for pgx and the options they set.
func ownParams(u *url.URL) (*url.URL, Options, error) {
	var o Options
	q := u.Query()
	if vs, ok := q["schema"]; ok {
		o.Schema = vs[len(vs)-1]
		if o.Schema == "" {
			return nil, o, fmt.Errorf("pgstate: URL parameter schema is empty")
		}
		q.Del("schema")
	}
	if vs, ok := q["timeout"]; ok {
		t, err := time.ParseDuration(vs[len(vs)-1])
		if err != nil || t <= 0 {
			return nil, o, fmt.Errorf("pgstate: URL parameter timeout=%q is not a positive duration such as 10s", vs[len(vs)-1])
		}
		o.Timeout = t
		q.Del("timeout")
	}
	if vs, ok := q["listen"]; ok {
		o.Listen = vs[len(vs)-1]
		if o.Listen == "" {
			return nil, o, fmt.Errorf("pgstate: URL parameter listen is empty: give off or a connection string")
		}
		q.Del("listen")
	}
	for _, p := range []struct {
		name string
		to   *int
	}{{"writers", &o.Writers}, {"max_batch", &o.MaxBatch}} {
		if vs, ok := q[p.name]; ok {
			n, err := strconv.Atoi(vs[len(vs)-1])
			if err != nil || n < 1 {
				return nil, o, fmt.Errorf("pgstate: URL parameter %s=%q is not a whole number of at least 1", p.name, vs[len(vs)-1])
			}
			*p.to = n
			q.Del(p.name)
		}
	}
	v := *u
	v.RawQuery = q.Encode()
	return &v, o, nil
}
