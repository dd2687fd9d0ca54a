package sqlitestate

import (
	"context"
	"fmt"
	"net/url"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// Scheme is the URL scheme sqlitestate registers its URLOpener under.
const Scheme = "sqlite"

func init() { state.Register(Scheme, new(URLOpener)) }

// URLOpener opens "sqlite:///abs/path.db" and "sqlite:rel/path.db" URLs.
// The query parameter synchronous (full or normal) sets Options.Synchronous;
// others are rejected.
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
		default:
			return nil, fmt.Errorf("sqlitestate: unknown URL parameter %q (known: synchronous)", k)
		}
	}
	return Open(ctx, path, &o)
}
