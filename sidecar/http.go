package sidecar

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state/mcpadapter"
)

// httpOptions configures mcp-go's Streamable HTTP transport.
func (s *Sidecar) httpOptions() []server.StreamableHTTPOption {
	opts := []server.StreamableHTTPOption{
		server.WithStreamableHTTPLogger(quieter(s.log.With("component", "mcp-go"), s.cfg)),
	}
	if s.cfg.Stateful {
		// Sessions live in this process's memory, at most MaxSessions of
		// them: older clients need sticky sessions. A session idle for
		// SessionIdleTimeout is swept; an open GET stream gets heartbeats,
		// which count as activity.
		opts = append(opts, server.WithSessionIdManager(s.sessions),
			server.WithSessionIdleTTL(s.cfg.SessionIdleTimeout),
			server.WithHeartbeatInterval(max(s.cfg.SessionIdleTimeout/3, time.Second)))
	} else {
		// Any replica answers any request; no GET stream, which in stateless
		// mode would be one stream shared by every older client.
		opts = append(opts, server.WithStateLess(true), server.WithDisableStreaming(true))
	}
	if s.auth != nil {
		// The DNS-rebinding guard protects an unauthenticated loopback server
		// from web pages; a bearer token does that better, and the guard
		// would reject a same-pod proxy that keeps the original Host.
		opts = append(opts, server.WithDisableLocalhostProtection(true))
	}
	return opts
}

// routes builds the HTTP handler. A request to /mcp passes, in order: with
// tracing, the extraction of its trace headers; the metrics;
// authentication, answered from the headers before any of the body is read;
// the body, read whole within ReadTimeout and MaxRequestBytes, decoded once
// and admitted against its tenant's share (admission.go); the cap on
// requests served at once; mcp-go.
func (s *Sidecar) routes() http.Handler {
	var mcpHandler http.Handler = s.taskFront(s.mcpHTTP)
	mcpHandler = s.limitConcurrency(mcpHandler)
	mcpHandler = s.readBody(mcpHandler)
	if s.auth != nil {
		mcpHandler = s.auth.wrap(mcpHandler)
	}
	mcpHandler = s.metrics.InstrumentMCP(mcpHandler)
	if s.cfg.TracerProvider != nil {
		mcpHandler = extractTrace(mcpHandler)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcpHandler)
	s.auth.routes(mux) // RFC 9728 metadata, with OAuth
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", s.metrics.Handler())
	s.mountConsole(mux) // /ui, when on (console.go)
	return mux
}

// readBody reads a POST's body whole before mcp-go sees it: within
// ReadTimeout from the first byte of the body (a slower client gets 408 and
// loses the connection) and within MaxRequestBytes (413). The message then
// goes through mcpadapter.PrepareMessage, is decoded once (decodeRequest)
// and is admitted against its tenant's share (admission.go): a tenant at a
// limit gets 429. In stateful mode an initialize beyond MaxSessions gets
// 503, beyond the tenant's share 429. Every request that reaches readBody
// has passed authentication: its connection is marked so (conns.go).
func (s *Sidecar) readBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		markAuthenticated(r)
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		tenant := s.tenantOf(r)
		if ref := s.admit.precheck(tenant); ref != nil {
			refuseBody(w)
			s.refuse(w, r, tenant, decoded{}, ref)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		body, err := readAll(w, r.Body, r.ContentLength, s.cfg.MaxRequestBytes)
		if err != nil {
			refuseBody(w)
			var tooBig *http.MaxBytesError
			switch {
			case errors.As(err, &tooBig):
				http.Error(w, fmt.Sprintf("request body too large: the limit is %d bytes", s.cfg.MaxRequestBytes),
					http.StatusRequestEntityTooLarge)
			case errors.Is(err, os.ErrDeadlineExceeded):
				http.Error(w, fmt.Sprintf("request body not received within %v", s.cfg.ReadTimeout), http.StatusRequestTimeout)
			default:
				http.Error(w, "request body could not be read", http.StatusBadRequest)
			}
			return
		}
		_ = rc.SetReadDeadline(time.Time{})
		body = mcpadapter.PrepareMessage(body)
		d := decodeRequest(body)
		release, ref := s.admit.admit(tenant, d.kind)
		if ref != nil {
			s.refuse(w, r, tenant, d, ref)
			return
		}
		defer release()
		if s.sessions != nil && d.kind == kindInitialize {
			if s.sessions.full() {
				w.Header().Set("Retry-After", strconv.Itoa(int(max(s.cfg.SessionIdleTimeout/time.Second, 1))))
				http.Error(w, fmt.Sprintf("too many sessions: this server keeps at most %d; try again later", s.cfg.MaxSessions),
					http.StatusServiceUnavailable)
				return
			}
			if ref := s.admit.reserveSession(tenant); ref != nil {
				ref.retryAfter = max(s.cfg.SessionIdleTimeout, time.Second)
				s.refuse(w, r, tenant, d, ref)
				return
			}
			defer func() {
				// The session mcp-go started, if it did, is the tenant's.
				id := w.Header().Get(server.HeaderKeySessionID)
				if id == "" || !s.sessions.own(id, tenant) {
					s.admit.endSession(tenant)
				}
			}()
		}
		rb := &bodyReader{}
		rb.Reset(body)
		r.Body, r.ContentLength = rb, int64(len(body))
		r = r.WithContext(context.WithValue(r.Context(), decodedKey{}, d))
		next.ServeHTTP(w, r)
	})
}

// readAll reads body to its end, within limit (beyond it, the error is an
// *http.MaxBytesError and w's connection is closed after the answer). A
// body whose length was declared (up to 64 KiB: a client cannot make the
// server reserve more than it sends) is read into a buffer of exactly that
// size; net/http ends the body there, so the limit cannot be reached.
func readAll(w http.ResponseWriter, body io.ReadCloser, declared, limit int64) ([]byte, error) {
	if declared >= 0 && declared <= min(limit, 64<<10) {
		b := make([]byte, declared)
		if _, err := io.ReadFull(body, b); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		return b, nil
	}
	size := 4 << 10 // chunked: no length declared
	if declared > 0 {
		size = 64 << 10
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	_, err := b.ReadFrom(http.MaxBytesReader(w, body, limit))
	return b.Bytes(), err
}

// A bodyReader is a request's body, read already: io.NopCloser of a
// bytes.Reader in one allocation.
type bodyReader struct{ bytes.Reader }

// Close does nothing.
func (*bodyReader) Close() error { return nil }

// limitConcurrency lets at most MaxConcurrentRequests POSTs into mcp-go at
// once; the others wait for a slot up to RequestTimeout, then get 503.
// GET streams (stateful mode) are not counted: they are held open, not
// served. Nor are long-polls (state_wait, workflow_wait): they wait, idle,
// for the very writes a full set of slots would hold back; MaxConnections
// bounds them, and each tenant's share (admission.go).
func (s *Sidecar) limitConcurrency(next http.Handler) http.Handler {
	slots := make(chan struct{}, s.cfg.MaxConcurrentRequests)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || isLongPollRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		select {
		case slots <- struct{}{}:
		default:
			ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
			defer cancel()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				w.Header().Set("Retry-After", "1")
				http.Error(w, "server busy: too many requests in flight", http.StatusServiceUnavailable)
				return
			}
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}
