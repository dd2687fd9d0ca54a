package mcpadapter

import (
	"context"

	"github.com/statesidecar/state"
)

// The results of the observability tools, fields in the Python sidecar's
// order followed by the new ones.
type (
	healthResult struct {
		Status            string   `json:"status" desc:"ok, or error: and the reason"`
		Backend           string   `json:"backend"`
		UptimeS           seconds  `json:"uptime_s"`
		KeyCount          int64    `json:"key_count"`
		WorkflowCount     int64    `json:"workflow_count"`
		Version           string   `json:"version"`
		LeaseCount        int64    `json:"lease_count"`
		SessionCount      int64    `json:"session_count"`
		HistoryCount      int64    `json:"history_count"`
		WorkflowsByStatus byStatus `json:"workflows_by_status"`
		Namespace         string   `json:"namespace"`
	}
	byStatus struct {
		Created int64 `json:"created"`
		Claimed int64 `json:"claimed"`
		Running int64 `json:"running"`
		Done    int64 `json:"done"`
		Failed  int64 `json:"failed"`
	}
	resetResult struct {
		OK      bool  `json:"ok"`
		Cleared int64 `json:"cleared" desc:"the number of records deleted"`
	}
)

// sidecarHealth reports a backend failure in status, as the Python sidecar
// does, rather than as a tool error; the reason, which may name the
// backend's address, goes to the log under the error id the status shows.
func sidecarHealth(ctx context.Context, st *state.Store, _ args, o *Options) (any, error) {
	h, err := st.Health(ctx)
	if err != nil {
		h.Status = "error: " + internal(ctx, o.logger(), "sidecar_health", err, "the backend did not answer")
	}
	by := h.RunsByStatus
	return healthResult{Status: h.Status, Backend: h.Backend, UptimeS: seconds(h.Uptime), KeyCount: h.Keys,
		WorkflowCount: h.Runs, Version: h.Version, LeaseCount: h.Leases, SessionCount: h.Sessions,
		HistoryCount: h.Events, Namespace: h.Namespace,
		WorkflowsByStatus: byStatus{Created: by[state.StatusCreated], Claimed: by[state.StatusClaimed],
			Running: by[state.StatusRunning], Done: by[state.StatusDone], Failed: by[state.StatusFailed]}}, nil
}

func sidecarReset(ctx context.Context, st *state.Store, _ args, o *Options) (any, error) {
	if !o.AllowReset {
		return nil, errResetDisabled
	}
	n, err := st.Reset(ctx)
	if err != nil {
		return nil, err
	}
	return resetResult{OK: true, Cleared: n}, nil
}
