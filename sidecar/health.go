package sidecar

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/statesidecar/state"
)

// readyTimeout bounds one readiness check of the backend.
const readyTimeout = 5 * time.Second

// healthz answers 200 while the process serves HTTP at all.
func (s *Sidecar) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers 200 when the backend answers (Store.Ping) and 503
// otherwise or once a shutdown has begun. The reason is logged, not shown:
// the endpoint needs no token and a backend error may name hosts.
func (s *Sidecar) readyz(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"backend": s.store.Backend(), "version": state.Version}
	if s.draining.Load() {
		body["status"] = "shutting down"
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.log.Warn("readiness check failed", "err", err)
		body["status"] = "error"
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["status"] = "ok"
	writeJSON(w, http.StatusOK, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
