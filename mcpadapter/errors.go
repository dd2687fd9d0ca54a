package mcpadapter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/statesidecar/state"
	"go.opentelemetry.io/otel/trace"
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
// place that reads state errors for tool errors. An error whose text could
// name a backend address, a file or a driver's message is not shown: the
// client gets a stable message with an error id, and the error goes to
// log with the same id.
func message(ctx context.Context, log *slog.Logger, tool string, err error) string {
	var (
		ae *argError
		fe *state.FieldError
		ce *state.ConflictError
		cl *state.ClaimError
		pe *state.ParentError
		nh *state.NotHeldError
		he *state.HeldError
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
	case errors.As(err, &cl) && cl.Status == state.StatusWaiting:
		return cl.Error() + "; claim it once workflow_status shows status 'created'"
	case errors.As(err, &cl):
		return cl.Error() + "; the run is finished and accepts no more checkpoints"
	case errors.As(err, &pe):
		return pe.Error()
	case errors.As(err, &nh):
		return nh.Error() + "; your claim on this run expired or was taken over by another agent: stop working on it, or call workflow_claim to claim it again"
	case errors.As(err, &he):
		return he.Error()
	case errors.Is(err, errResetDisabled):
		return errResetDisabled.Error()
	case errors.Is(err, ErrForbidden):
		return err.Error() // DeniedError's text, or the host's Authorize's
	case errors.Is(err, state.ErrNotFound) && errors.As(err, &se) && strings.HasPrefix(se.Op, "workflow."):
		return runNotFound(se.Key)
	case errors.As(err, &se) && isSentinel(se.Err):
		return se.Error() // "state: kv.set "k": store is closed": the op, the caller's own key, a fixed text
	case errors.Is(err, context.DeadlineExceeded):
		return internal(ctx, log, tool, err, "the call did not finish before its deadline (the store is slow or unreachable); try again")
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The call's own context ended: its client went away (or the
		// server is stopping). Nothing failed, and nobody reads the answer.
		log.DebugContext(ctx, "tool call cancelled: the client went away", "tool", tool)
		return "the call was cancelled before it finished"
	case errors.Is(err, context.Canceled):
		return internal(ctx, log, tool, err, "the call was cancelled before it finished")
	}
	return internal(ctx, log, tool, err, "the store could not complete the call")
}

// isSentinel reports whether err is one of the state package's sentinel
// errors itself, whose texts are fixed.
func isSentinel(err error) bool {
	for _, s := range []error{state.ErrNotFound, state.ErrClosed, state.ErrInvalid, state.ErrConflict,
		state.ErrLeaseHeld, state.ErrNotHeld, state.ErrClaimed, state.ErrFinished, state.ErrNoEncryption} {
		if err == s {
			return true
		}
	}
	return false
}

// internal logs err under a new error id and returns what the client is
// told instead: what happened, in words that name nothing inside, and the
// id, which an operator finds in the log.
//
// With tracing, the id is also an attribute of the call's span, and the log
// line names the trace.
func internal(ctx context.Context, log *slog.Logger, tool string, err error, what string) string {
	id := newErrorID()
	attrs := []any{"error_id", id, "tool", tool, "err", err}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrErrorID.String(id))
		attrs = append(attrs, "trace_id", span.SpanContext().TraceID().String())
	}
	log.ErrorContext(ctx, "tool call failed", attrs...)
	return fmt.Sprintf("%s (error id %s; the details are in the server's log)", what, id)
}

// newErrorID returns a random id that ties a client's error to a log line.
func newErrorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// runNotFound is the Python sidecar's text for an unknown run.
func runNotFound(id string) string { return fmt.Sprintf("Workflow '%s' not found", id) }

// errResetDisabled answers sidecar_reset when Options.AllowReset is false.
var errResetDisabled = errors.New("sidecar_reset is disabled on this server because it irreversibly deletes all state; " +
	"its operator can enable it (mcpadapter Options.AllowReset; SIDECAR_ALLOW_RESET=true for the sidecar)")
