package mcptasks

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// Handler returns next (mcp-go's StreamableHTTPServer) behind the task
// front: a POST whose message HandleMessage answers gets that answer as
// JSON; every other request reaches next unchanged, its body included. Put
// it after authentication, so that Options.Owner finds the caller in the
// request's context, and after whatever bounds the size of a body.
func (t *Tasks) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "request body could not be read", http.StatusBadRequest)
			return
		}
		_ = r.Body.Close()
		if t.Serve(w, r, body) {
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// Serve answers the HTTP request r, whose body msg is, when the message is
// the front's (HandleStream), and reports whether it did; otherwise it
// writes nothing. An answer is JSON, or an SSE stream for a
// subscriptions/listen (its notifications, then its reply).
func (t *Tasks) Serve(w http.ResponseWriter, r *http.Request, msg []byte) bool {
	streaming := false
	flush := http.NewResponseController(w)
	event := func(m []byte) {
		_, _ = fmt.Fprintf(w, "event: message\ndata: %s\n\n", m)
		_ = flush.Flush()
	}
	emit := func(m []byte) {
		if !streaming {
			streaming = true
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
		}
		event(m)
	}
	reply, status, ok := t.HandleStream(r.Context(), msg, r.Header, emit)
	switch {
	case !ok:
		return false
	case streaming:
		event(reply)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(append(reply, '\n'))
	}
	return true
}
