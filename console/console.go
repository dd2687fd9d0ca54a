// Package console is an operator console for a *state.Store: server-rendered
// HTML pages of runs (with their claims counting down, their checkpoints,
// outputs, history and children), leases, keys, sessions, tasks, a live
// event stream from the store's change feed, and health, with a few actions
// behind a confirmation (release a stuck claim, fail a run, delete a key,
// cancel a task). Its assets are embedded: it works offline.
//
// Every page is one bounded, indexed read of the store (a page of a listing,
// never a scan of the namespace), so the console costs the same at 100 runs
// and at 100,000.
//
// The sidecar mounts it at /ui (package sidecar, SIDECAR_CONSOLE), behind its
// bearer-token authentication and scoped to the namespace of the caller's
// token. Options.Authorize is the hook that lets a host require a scope for
// the actions.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcptasks"
)

//go:embed templates/*.html static/*
var assets embed.FS

// A Scope is what a request may do: ScopeRead to see the pages, ScopeWrite
// and ScopeAdmin for the actions.
type Scope string

// The scopes the console asks Options.Authorize for.
const (
	ScopeRead  Scope = "state:read"
	ScopeWrite Scope = "state:write"
	ScopeAdmin Scope = "state:admin"
)

// ErrForbidden is what Options.Authorize returns, wrapped or not, to refuse
// a request: the console answers 403.
var ErrForbidden = errors.New("forbidden")

// The scope each action needs. Releasing another agent's claim and failing
// its run override the owner of the run: admin. Deleting a key and cancelling
// one's own task are ordinary writes.
var actionScope = map[string]Scope{
	"release": ScopeAdmin,
	"fail":    ScopeAdmin,
	"delete":  ScopeWrite,
	"cancel":  ScopeWrite,
}

// Options configure a Console. Store is required.
type Options struct {
	// Store is the store shown; the console works in the namespace
	// Namespace returns for each request, in Store's own otherwise.
	Store *state.Store
	// Namespace returns the namespace a request may see ("" for the
	// store's own). Nil means the store's own namespace for every request.
	Namespace func(r *http.Request) string
	// Authorize is asked before every page (ScopeRead) and action
	// (ScopeWrite or ScopeAdmin). A non-nil error refuses the request
	// (403). Nil allows everything: the host's authentication alone
	// decides who reaches the console.
	Authorize func(r *http.Request, need Scope) error
	// Tasks, when set, adds the tasks page: the caller's tasks (TaskOwner)
	// and their cancellation.
	Tasks *mcptasks.Tasks
	// TaskOwner names the owner of a request's tasks; nil means the
	// request's namespace without a principal.
	TaskOwner func(r *http.Request) (mcptasks.Owner, error)
	// Base is the path the console is mounted at, such as "/ui" (the
	// default). The host strips it (http.StripPrefix) before the console
	// sees a request.
	Base string
	// Now is the clock of the countdowns; nil means time.Now.
	Now func() time.Time
	// Logger receives the errors of pages; nil discards them.
	Logger *slog.Logger
	// Heartbeat is the interval of the keep-alive comments on the event
	// stream; 0 means 15 seconds.
	Heartbeat time.Duration
}

// A Console is the console's HTTP handler. Close ends its event streams.
type Console struct {
	o      Options
	pages  map[string]*template.Template
	mux    *http.ServeMux
	static http.Handler

	mu      sync.Mutex
	closed  bool
	streams map[*stream]struct{}
}

// New returns a console over opts.Store.
func New(opts Options) (*Console, error) {
	if opts.Store == nil {
		return nil, errors.New("console: Options.Store must not be nil")
	}
	if opts.Base == "" {
		opts.Base = "/ui"
	}
	opts.Base = "/" + strings.Trim(opts.Base, "/")
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	c := &Console{o: opts, pages: map[string]*template.Template{}, streams: map[*stream]struct{}{}}
	if err := c.parse(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c.static = http.StripPrefix("/static/", http.FileServerFS(static))
	c.routes()
	return c, nil
}

// parse builds one template per page: the layout with the page's content.
func (c *Console) parse() error {
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "templates/layout.html")
	if err != nil {
		return fmt.Errorf("console: parsing the layout: %w", err)
	}
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return err
	}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.Must(layout.Clone()).ParseFS(assets, n)
		if err != nil {
			return fmt.Errorf("console: parsing page %s: %w", name, err)
		}
		c.pages[name] = t
	}
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.page(c.overview))
	m.HandleFunc("GET /runs", c.page(c.runs))
	m.HandleFunc("GET /runs/{id}", c.page(c.run))
	m.HandleFunc("GET /leases", c.page(c.leases))
	m.HandleFunc("GET /keys", c.page(c.keys))
	m.HandleFunc("GET /key", c.page(c.key))
	m.HandleFunc("GET /sessions", c.page(c.sessions))
	m.HandleFunc("GET /tasks", c.page(c.tasks))
	m.HandleFunc("GET /events", c.page(c.events))
	m.HandleFunc("GET /events/stream", c.stream)
	m.HandleFunc("GET /confirm/{action}", c.page(c.confirm))
	m.HandleFunc("POST /act/{action}", c.act)
	m.Handle("GET /static/", c.static)
	c.mux = m
}

// ServeHTTP serves the console; the host has stripped Options.Base.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	if err := c.authorize(r, ScopeRead); err != nil {
		http.Error(w, "403 forbidden: "+err.Error(), http.StatusForbidden)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Static serves the console's embedded stylesheet and script (paths
// /static/...), which hold nothing secret: a host may serve them without
// authentication, for its sign-in page.
func (c *Console) Static() http.Handler { return c.static }

// Close ends the open event streams (at the start of a server's shutdown,
// so that it does not wait for them) and refuses new ones.
func (c *Console) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for s := range c.streams {
		s.cancel()
	}
}

func (c *Console) authorize(r *http.Request, need Scope) error {
	if c.o.Authorize == nil {
		return nil
	}
	if err := c.o.Authorize(r, need); err != nil {
		if errors.Is(err, ErrForbidden) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	return nil
}

// store returns the store in the request's namespace.
func (c *Console) store(r *http.Request) (*state.Store, error) {
	if c.o.Namespace == nil {
		return c.o.Store, nil
	}
	ns := c.o.Namespace(r)
	if ns == "" || ns == c.o.Store.NamespaceName() {
		return c.o.Store, nil
	}
	return c.o.Store.Namespace(ns)
}

// A view is what every page template gets.
type view struct {
	Title   string
	Nav     string
	Base    string
	NS      string
	Backend string
	NowMs   int64
	// CanAdmin and CanWrite are set when the caller may take the actions
	// that need ScopeAdmin (release a claim, fail a run) and ScopeWrite
	// (delete a key, cancel a task): the page shows only those.
	CanAdmin bool
	CanWrite bool
	HasTasks bool
	Flash    string
	Data     any
	// After is the newest history event when the page was read: its
	// script follows the change feed from there and offers a reload.
	After int64
}

// A handler fills a page: its template name, title and data.
type handler func(r *http.Request, st *state.Store, v *view) (string, error)

// page serves a handler's page, or its error as a page.
func (c *Console) page(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		st, err := c.store(r)
		if err != nil {
			http.Error(w, "namespace: "+err.Error(), http.StatusBadRequest)
			return
		}
		v := &view{Base: c.o.Base, NS: st.NamespaceName(), Backend: st.Backend(),
			NowMs: c.o.Now().UnixMilli(), HasTasks: c.o.Tasks != nil, Flash: r.URL.Query().Get("flash")}
		v.CanAdmin = c.authorize(r, ScopeAdmin) == nil
		v.CanWrite = c.authorize(r, ScopeWrite) == nil
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		if evs, err := st.History(ctx, state.HistoryQuery{Limit: 1}); err == nil && len(evs) > 0 {
			v.After = evs[0].ID
		}
		name, err := h(r.WithContext(ctx), st, v)
		code := http.StatusOK
		if err != nil {
			code = statusOf(err)
			c.o.Logger.Warn("console page", "path", r.URL.Path, "err", err)
			name, v.Title, v.Data = "error", "Error", err.Error()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		if err := c.pages[name].ExecuteTemplate(w, "layout", v); err != nil {
			c.o.Logger.Warn("console template", "page", name, "err", err)
		}
	}
}

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, state.ErrNotFound), errors.Is(err, mcptasks.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, state.ErrInvalid), errors.Is(err, errBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, state.ErrNotHeld), errors.Is(err, state.ErrFinished), errors.Is(err, mcptasks.ErrFinished),
		errors.Is(err, state.ErrConflict):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// errBadRequest marks a malformed console request.
var errBadRequest = errors.New("bad request")

// sameOrigin reports whether a state-changing request comes from the
// console's own pages: a browser sends Origin (or Sec-Fetch-Site) with a
// POST, and a page of another site cannot make it match. A client that
// sends neither is not a browser, and has passed authentication.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}
