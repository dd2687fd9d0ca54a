package memstate

import (
	"context"
	"fmt"
	"net/url"
	"sync"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
)

// Scheme is the URL scheme memstate registers its URLOpener under.
const Scheme = "mem"

func init() { state.Register(Scheme, new(URLOpener)) }

// URLOpener opens "mem://name" URLs: the same name gives the same driver
// until it is closed; an empty name gives a fresh driver. No query
// parameters are accepted.
type URLOpener struct {
	mu    sync.Mutex
	named map[string]*Driver
}

var _ state.URLOpener = (*URLOpener)(nil)

// OpenDriverURL implements state.URLOpener.
func (o *URLOpener) OpenDriverURL(_ context.Context, u *url.URL) (backend.Driver, error) {
	for p := range u.Query() {
		return nil, fmt.Errorf("memstate: unknown URL parameter %q", p)
	}
	name := u.Host + u.Path
	if name == "" {
		return New(), nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if d := o.named[name]; d != nil {
		return d, nil
	}
	if o.named == nil {
		o.named = map[string]*Driver{}
	}
	d := New()
	d.onClose = func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.named[name] == d {
			delete(o.named, name)
		}
	}
	o.named[name] = d
	return d, nil
}
