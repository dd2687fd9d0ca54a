package sidecar

import (
	"encoding/base64"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"

	"github.com/statesidecar/state/console"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/mcptasks"
)

// The operator console (package console) at /ui: on by default when the
// sidecar listens on loopback only, off otherwise unless SIDECAR_CONSOLE
// says so. It sits behind the bearer tokens of /mcp, and shows the namespace
// of the caller's token. A browser cannot send a bearer header with a link,
// so /ui/login takes the token once and keeps it in a cookie (HttpOnly,
// SameSite=Strict) that stands for the header on the console's paths only.

// A ConsoleMode turns the console on or off: ConsoleAuto ("" or "auto") is
// on for a loopback listen address and off otherwise.
type ConsoleMode string

// The console modes.
const (
	ConsoleAuto ConsoleMode = "auto"
	ConsoleOn   ConsoleMode = "true"
	ConsoleOff  ConsoleMode = "false"
)

// consoleCookie holds a browser's bearer token for the console.
const consoleCookie = "state_console_token"

func init() {
	settings = append(settings,
		setting{env: "SIDECAR_CONSOLE", flag: "console", only: TransportHTTP,
			usage: "operator console at /ui: auto (on when listening on loopback only), true or false",
			show: func(c *Config) string {
				if c.Console == "" {
					return string(ConsoleAuto)
				}
				return string(c.Console)
			},
			set: func(c *Config, v string) error {
				switch m := ConsoleMode(strings.ToLower(strings.TrimSpace(v))); m {
				case ConsoleAuto, ConsoleOn, ConsoleOff:
					c.Console = m
					return nil
				case "on", "1":
					c.Console = ConsoleOn
					return nil
				case "off", "0":
					c.Console = ConsoleOff
					return nil
				}
				return fmt.Errorf("%q is not auto, true or false", v)
			}})
}

// ConsoleEnabled reports whether the configuration serves the console.
func (c *Config) ConsoleEnabled() bool {
	if c.Transport != TransportHTTP {
		return false
	}
	switch c.Console {
	case ConsoleOn:
		return true
	case ConsoleOff:
		return false
	}
	return isLoopback(c.Host)
}

// newConsole builds the console when it is on.
func (s *Sidecar) newConsole() error {
	if !s.cfg.ConsoleEnabled() {
		return nil
	}
	authz := s.cfg.ConsoleAuthorize
	if authz == nil && s.auth != nil {
		authz = callerScopes
	}
	c, err := console.New(console.Options{
		Store: s.store,
		Namespace: func(r *http.Request) string {
			ns, _ := mcpadapter.NamespaceFrom(r.Context())
			return ns
		},
		Authorize: authz,
		Tasks:     s.tasks,
		TaskOwner: func(r *http.Request) (mcptasks.Owner, error) { return s.taskOwner(r.Context()) },
		Base:      "/ui",
		Logger:    s.log.With("component", "console"),
	})
	if err != nil {
		return err
	}
	s.console = c
	return nil
}

// mountConsole adds the console to mux when it is on.
func (s *Sidecar) mountConsole(mux *http.ServeMux) {
	if s.console == nil {
		return
	}
	var h http.Handler = http.StripPrefix("/ui", s.console)
	if s.auth != nil {
		auth := s.auth
		authed := h
		inner := auth.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			markAuthenticated(r) // its connection is no longer an anonymous one (conns.go)
			authed.ServeHTTP(w, r)
		}))
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				ck, err := r.Cookie(consoleCookie)
				if err != nil {
					http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
					return
				}
				tok, err := base64.RawURLEncoding.DecodeString(ck.Value)
				if err != nil {
					http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
					return
				}
				r.Header.Set("Authorization", "Bearer "+string(tok))
			}
			inner.ServeHTTP(w, r)
		})
		mux.Handle("/ui/login", s.consoleLogin(auth))
		mux.Handle("GET /ui/static/", http.StripPrefix("/ui", s.console.Static())) // for the sign-in page
	} else {
		h = loopbackHostOnly(h)
	}
	mux.Handle("/ui/", h)
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusSeeOther))
}

// consoleAccess is the access level each console scope needs.
var consoleAccess = map[console.Scope]mcpadapter.Access{
	console.ScopeRead:  mcpadapter.AccessRead,
	console.ScopeWrite: mcpadapter.AccessWrite,
	console.ScopeAdmin: mcpadapter.AccessAdmin,
}

// callerScopes is the console's authorization when the sidecar
// authenticates: the caller's access (its token's scopes, state:read,
// state:write or state:admin by default) must cover what the page or
// action needs, as for the tools.
func callerScopes(r *http.Request, need console.Scope) error {
	c, ok := mcpadapter.CallerFrom(r.Context())
	if !ok {
		return fmt.Errorf("%w: not authenticated", console.ErrForbidden)
	}
	if c.Access < consoleAccess[need] {
		return fmt.Errorf("%w: this needs %s access, and this token has %s access", console.ErrForbidden,
			consoleAccess[need], c.Access)
	}
	return nil
}

// loopbackHostOnly refuses a request whose Host is not a loopback name: a
// console without tokens must not answer a page of another site that
// rebinds its DNS name to 127.0.0.1.
func loopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "403 forbidden: the console without tokens answers only to a loopback Host (localhost, 127.0.0.1, [::1])",
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · state console</title>
<link rel="stylesheet" href="/ui/static/app.css"></head>
<body><main><h1>state console</h1>
{{if .}}<p class="error" id="login-error">{{.}}</p>{{end}}
<form method="post" action="/ui/login" class="filters">
<label>Bearer token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button id="login">Sign in</button></form>
<p class="muted">The console shows the namespace of your token. The token is kept in a cookie for this site's /ui pages only.</p>
</main></body></html>`))

// consoleLogin serves the sign-in form and turns a valid token into the
// console's cookie.
func (s *Sidecar) consoleLogin(auth *authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Cache-Control", "no-store")
		switch r.Method {
		case http.MethodGet:
			_ = loginPage.Execute(w, "")
		case http.MethodPost:
			r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
			tok := strings.TrimSpace(r.PostFormValue("token"))
			probe := (&http.Request{Header: http.Header{"Authorization": {"Bearer " + tok}}}).WithContext(r.Context())
			if _, err := auth.authenticate(probe); err != nil || tok == "" {
				if auth.onFailure != nil {
					auth.onFailure()
				}
				w.WriteHeader(http.StatusUnauthorized)
				_ = loginPage.Execute(w, "That token is not valid.")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: consoleCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(tok)), Path: "/ui/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// closeConsole ends the console's event streams, at the start of a
// shutdown.
func (s *Sidecar) closeConsole() {
	if s.console != nil {
		s.console.Close()
	}
}
