package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state/backend"
)

// Sentinel errors. Every error a Store method returns is an *Error that wraps
// one of these (or an error of the backend or the context), so callers branch
// with errors.Is and read details with errors.As.
var (
	// ErrNotFound: the key, run, lease or session does not exist or expired.
	ErrNotFound = backend.ErrNotFound
	// ErrClosed: the store was closed.
	ErrClosed = backend.ErrClosed
	// ErrUnavailable: the backend could not serve the call within its bound
	// (a SQLite file locked by another process for longer than
	// sqlitestate's LockTimeout, say). Nothing was written; try again later.
	ErrUnavailable = backend.ErrUnavailable
	// ErrInvalid: an argument was rejected; a *FieldError names it.
	ErrInvalid = errors.New("invalid argument")
	// ErrConflict: a compare-and-set failed; a *ConflictError names the
	// current version.
	ErrConflict = errors.New("version conflict")
	// ErrLeaseHeld: another holder has the lease; a *HeldError names it.
	ErrLeaseHeld = errors.New("lease held by another holder")
	// ErrNotHeld: the caller does not hold the lease or claim it acted on
	// (it expired, was released, or was taken over); a *NotHeldError says why.
	ErrNotHeld = errors.New("not held by caller")
	// ErrClaimed: another agent holds a live claim on the run; a *ClaimError
	// names it.
	ErrClaimed = errors.New("workflow claimed by another agent")
	// ErrFinished: the run is done or failed; a *ClaimError names its status.
	ErrFinished = errors.New("workflow already finished")
	// ErrWaiting: the run is a join parent waiting for its children to
	// finish (StatusWaiting); a *ClaimError names its status.
	ErrWaiting = errors.New("workflow waiting for its children to finish")
	// ErrParentNotFound: the parent named by WithParent does not exist; a
	// *ParentError names it.
	ErrParentNotFound = errors.New("parent run not found")
	// ErrParentFinished: the parent named by WithParent is done or failed,
	// or is a join parent that was released and claimed by its aggregator
	// (it takes no more children); a *ParentError names it.
	ErrParentFinished = errors.New("parent run takes no more children")
	// ErrNotFinished: DeleteRun was asked to delete a run that is still
	// open (waiting, created, claimed or running).
	ErrNotFinished = errors.New("workflow not finished")
	// ErrHasChildren: DeleteRun was asked to delete a run that has
	// children; delete them first.
	ErrHasChildren = errors.New("workflow has children")
)

// An Error records a failed Store operation and the key it concerned.
type Error struct {
	// Op is the operation, such as "kv.set" or "workflow.claim".
	Op string
	// Key is the key, run id, resource id or session id, if any.
	Key string
	// Err is the cause.
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("state: %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("state: %s %q: %v", e.Op, e.Key, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// A FieldError says which argument was rejected and why. It matches
// ErrInvalid.
type FieldError struct {
	// Field names the argument in the words of the store's records, in
	// snake case: "key", "run_id", "agent_id", "ttl", "claim_ttl". An
	// adapter says it in its own terms where they differ (mcpadapter's
	// tools take "ttl" as ttl_seconds and name that).
	Field string
	// Problem says what is wrong with it, as a phrase that follows the
	// field name: "must not be empty".
	Problem string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + " " + e.Problem }

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// A ConflictError reports a failed compare-and-set. It matches ErrConflict.
type ConflictError struct {
	// Current is the version the key has now; 0 means it is absent.
	Current int64
}

// Error implements error.
func (e *ConflictError) Error() string {
	if e.Current == 0 {
		return "version conflict: the key does not exist (current version 0)"
	}
	return fmt.Sprintf("version conflict: current version is %d", e.Current)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// A HeldError reports that another holder has a lease. It matches
// ErrLeaseHeld.
type HeldError struct {
	Holder    string
	ExpiresAt time.Time
}

// Error implements error. The text matches the Python sidecar's reason.
func (e *HeldError) Error() string { return fmt.Sprintf("Held by '%s'", e.Holder) }

// Unwrap returns ErrLeaseHeld.
func (e *HeldError) Unwrap() error { return ErrLeaseHeld }

// A ClaimError reports why a run cannot be claimed or written. It matches
// ErrFinished when the run is done or failed, ErrWaiting when it is a join
// parent waiting for its children, and ErrClaimed otherwise.
type ClaimError struct {
	Status Status
	// Holder is the agent holding or having finished the run, or "".
	Holder string
}

// Error implements error. The text matches the Python sidecar's reason,
// which prints a missing agent as None.
func (e *ClaimError) Error() string {
	h := e.Holder
	if h == "" {
		h = "None"
	}
	if e.Status == StatusWaiting {
		return fmt.Sprintf("Workflow is in status '%s' (agent: %s): a join parent waiting for its children to finish", e.Status, h)
	}
	return fmt.Sprintf("Workflow is in status '%s' (agent: %s)", e.Status, h)
}

// Unwrap returns ErrFinished, ErrWaiting or ErrClaimed.
func (e *ClaimError) Unwrap() error {
	switch {
	case e.Status.Finished():
		return ErrFinished
	case e.Status == StatusWaiting:
		return ErrWaiting
	}
	return ErrClaimed
}

// A ParentError reports why a run cannot be created under the parent
// WithParent named. It matches ErrParentNotFound when the parent does not
// exist and ErrParentFinished otherwise.
type ParentError struct {
	ParentID string
	// Status is the parent's status; "" when it does not exist.
	Status Status
}

// Error implements error.
func (e *ParentError) Error() string {
	switch {
	case e.Status == "":
		return fmt.Sprintf("parent_run_id %q: no such run", e.ParentID)
	case e.Status.Finished():
		return fmt.Sprintf("parent_run_id %q: the parent is %s and takes no more children", e.ParentID, e.Status)
	}
	return fmt.Sprintf("parent_run_id %q: the join parent was released to its aggregator (status %s) and takes no more children; create another join parent", e.ParentID, e.Status)
}

// Unwrap returns ErrParentNotFound or ErrParentFinished.
func (e *ParentError) Unwrap() error {
	if e.Status == "" {
		return ErrParentNotFound
	}
	return ErrParentFinished
}

// A NotHeldError reports that the caller does not hold the lease or claim
// it acted on. It matches ErrNotHeld.
type NotHeldError struct {
	// Holder is the current live holder, or "" when nobody holds it.
	Holder string
	// Fence is the current fence of a run, when the check concerned one.
	Fence int64
}

// Error implements error.
func (e *NotHeldError) Error() string {
	if e.Holder == "" {
		return "not held by the caller: no live claim or lease (it expired or was released)"
	}
	if e.Fence != 0 {
		return fmt.Sprintf("not held by the caller: held by '%s' with fence %d", e.Holder, e.Fence)
	}
	return fmt.Sprintf("not held by the caller: held by '%s'", e.Holder)
}

// Unwrap returns ErrNotHeld.
func (e *NotHeldError) Unwrap() error { return ErrNotHeld }

// wrap turns err into an *Error for op and key; nil stays nil.
func wrap(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var se *Error
	if errors.As(err, &se) {
		return err
	}
	return &Error{Op: op, Key: key, Err: err}
}

// isNotFound reports whether err means "not found".
func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
