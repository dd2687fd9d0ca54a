package sqlitestate

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// Scheme is the URL scheme sqlitestate registers its URLOpener under.
const Scheme = "sqlite"

func init() { state.Register(Scheme, new(URLOpener)) }

// URLOpener opens "sqlite:///abs/path.db" and "sqlite:rel/path.db" URLs.
// The query parameters synchronous (full or normal), lock_timeout (a Go
// duration such as 2s), mmap_size (bytes), cache_kib and beside_python
// (true or false) set the Options of the same names (LockTimeout for
// lock_timeout, BesidePython for beside_python); others are rejected.
type URLOpener struct{}

var _ state.URLOpener = URLOpener{}

// OpenDriverURL implements state.URLOpener.
func (URLOpener) OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error) {
	path := u.Path
	if u.Opaque != "" {
		path = u.Opaque
	}
	if u.Host != "" {
		return nil, fmt.Errorf("sqlitestate: URL %q has a host; use sqlite:///absolute/path.db or sqlite:relative/path.db", u.Redacted())
	}
	var o Options
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "synchronous":
			o.Synchronous = v
		case "lock_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("sqlitestate: URL parameter lock_timeout=%q must be a positive Go duration such as 2s", v)
			}
			o.LockTimeout = d
		case "mmap_size", "cache_kib":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("sqlitestate: URL parameter %s must be an integer, got %q", k, v)
			}
			if k == "mmap_size" {
				o.MmapSize = n
			} else {
				o.CacheKiB = int(n)
			}
		case "beside_python":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("sqlitestate: URL parameter beside_python must be true or false, got %q", v)
			}
			o.BesidePython = b
		default:
			return nil, fmt.Errorf("sqlitestate: unknown URL parameter %q (known: synchronous, lock_timeout, mmap_size, cache_kib, beside_python)", k)
		}
	}
	return Open(ctx, path, &o)
}
