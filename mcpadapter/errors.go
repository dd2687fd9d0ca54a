package mcpadapter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/statesidecar/state"
)

// toolFields maps the field names of the Go API's *state.FieldError to the
// tool parameters that carry them, where the two differ.
var toolFields = map[string]string{
	"ttl":       "ttl_seconds",
	"claim_ttl": "claim_ttl_seconds",
}

// message turns an error of a tool call into the text of its tool error: the
// Python sidecar's message where it has one, else the error's own text, with
// a hint of what to do next where the error calls for one. It is the only
// place that reads state errors for tool errors.
func message(err error) string {
	var (
		ae *argError
		fe *state.FieldError
		ce *state.ConflictError
		cl *state.ClaimError
		nh *state.NotHeldError
		se *state.Error
	)
	switch {
	case errors.As(err, &ae):
		return ae.msg
	case errors.As(err, &fe):
		field := fe.Field
		if f, ok := toolFields[field]; ok {
			field = f
		}
		return field + " " + fe.Problem
	case errors.As(err, &ce):
		return ce.Error() + "; nothing was written: read the key again (state_get returns its version) and retry with that if_version"
	case errors.As(err, &cl):
		return cl.Error() + "; the run is finished and accepts no more checkpoints"
	case errors.As(err, &nh):
		return nh.Error() + "; your claim on this run expired or was taken over by another agent: stop working on it, or call workflow_claim to claim it again"
	case errors.Is(err, state.ErrNotFound) && errors.As(err, &se) && strings.HasPrefix(se.Op, "workflow."):
		return runNotFound(se.Key)
	}
	return err.Error()
}

// runNotFound is the Python sidecar's text for an unknown run.
func runNotFound(id string) string { return fmt.Sprintf("Workflow '%s' not found", id) }

// errResetDisabled answers sidecar_reset when Options.AllowReset is false.
var errResetDisabled = errors.New("sidecar_reset is disabled on this server because it irreversibly deletes all state; " +
	"its operator can enable it (mcpadapter Options.AllowReset; SIDECAR_ALLOW_RESET=true for the sidecar)")
