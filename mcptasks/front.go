package mcptasks

import (
	"bytes"
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
		if reply, status, ok := t.HandleMessage(r.Context(), body, r.Header); ok {
			Write(w, reply, status)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// Write sends a reply of HandleMessage as an HTTP response.
func Write(w http.ResponseWriter, reply []byte, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(reply, '\n'))
}
