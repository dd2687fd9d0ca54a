package state

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/statesidecar/state/backend"
)

// A URLOpener opens a backend driver from a URL. Backends register one for
// their scheme in an init function; applications blank-import the backend:
//
//	import _ "github.com/statesidecar/state/backend/sqlitestate"
type URLOpener interface {
	// OpenDriverURL opens a driver. It must reject query parameters it does
	// not know; the "namespace" parameter has already been removed.
	OpenDriverURL(ctx context.Context, u *url.URL) (backend.Driver, error)
}

// A URLMux maps URL schemes to URLOpeners.
type URLMux struct {
	mu      sync.RWMutex
	openers map[string]URLOpener
}

// Register makes o open URLs of scheme. It panics if o is nil or scheme is
// taken.
func (m *URLMux) Register(scheme string, o URLOpener) {
	if o == nil {
		panic("state: Register called with a nil URLOpener for scheme " + scheme)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.openers == nil {
		m.openers = map[string]URLOpener{}
	}
	if _, dup := m.openers[scheme]; dup {
		panic("state: Register called twice for scheme " + scheme)
	}
	m.openers[scheme] = o
}

// Schemes returns the registered schemes, sorted.
func (m *URLMux) Schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var s []string
	for k := range m.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens a Store from urlstr with opts (which may be nil). A "namespace"
// query parameter overrides opts.Namespace.
func (m *URLMux) Open(ctx context.Context, urlstr string, opts *Options) (*Store, error) {
	u, err := url.Parse(urlstr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its text quotes the URL, password and all
			err = ue.Err
		}
		return nil, wrap("open", "", invalid("url", "cannot be parsed: %v", err))
	}
	m.mu.RLock()
	o, ok := m.openers[u.Scheme]
	m.mu.RUnlock()
	if !ok && u.Scheme == "" {
		// A bare path ("state.db") is the usual slip: say what a store URL is.
		return nil, wrap("open", "", invalid("url", "%q has no scheme: a store is named by a URL, such as "+
			"sqlite:state.db (a file relative to the working directory), sqlite:///var/lib/app/state.db, mem://, "+
			"redis://host:6379/0 or postgres://user@host/db (registered here: %s)", u.Redacted(), strings.Join(m.Schemes(), ", ")))
	}
	if !ok {
		return nil, wrap("open", "", fmt.Errorf("unknown URL scheme %q (registered: %s; forgotten import?)",
			u.Scheme, strings.Join(m.Schemes(), ", ")))
	}
	var o2 Options
	if opts != nil {
		o2 = *opts
	}
	q := u.Query()
	if ns := q.Get("namespace"); ns != "" {
		if err := checkNamespace(ns); err != nil {
			return nil, wrap("open", "", err)
		}
		o2.Namespace = ns
	}
	q.Del("namespace")
	u.RawQuery = q.Encode()
	d, err := o.OpenDriverURL(ctx, u)
	if err != nil {
		return nil, wrap("open", "", err)
	}
	st, err := New(d, &o2)
	if err != nil {
		_ = d.Close()
		return nil, err
	}
	return st, nil
}

var defaultMux = new(URLMux)

// DefaultURLMux returns the URLMux used by Open and Register.
func DefaultURLMux() *URLMux { return defaultMux }

// Register registers o for scheme on the default URLMux.
func Register(scheme string, o URLOpener) { defaultMux.Register(scheme, o) }

// Open opens a Store from a URL with default Options, such as
// "sqlite:///var/lib/agent/state.db", "sqlite:state.db", "mem://" or
// "redis://localhost:6379/0?namespace=prod". The backend's package must be
// imported (for its side effect of registering its scheme).
func Open(ctx context.Context, urlstr string) (*Store, error) {
	return defaultMux.Open(ctx, urlstr, nil)
}
