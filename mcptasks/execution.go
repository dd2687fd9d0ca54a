package mcptasks

import (
	"context"
	"encoding/json"
	"time"
)

// An Execution is what a tool handler running as a task knows about it:
// FromContext returns it from the handler's context. Execution is
// at-least-once: when the process running a task dies, another process
// runs the call again from the start (Attempt is then greater than 1), and
// the handler may pick up from its last Checkpoint. Exactly one result is
// recorded.
type Execution struct {
	// TaskID is the task's id.
	TaskID string
	// Attempt counts the claims of the task: 1 for the first run, one more
	// per takeover.
	Attempt int64
	// ExpiresAt is when the task expires; the handler's context ends then
	// at the latest.
	ExpiresAt time.Time

	t     *Tasks
	rec   *record
	fence int64
}

type executionKey struct{}

// FromContext returns the task a tool handler runs as, if it runs as one.
func FromContext(ctx context.Context) (*Execution, bool) {
	e, ok := ctx.Value(executionKey{}).(*Execution)
	return e, ok
}

// Checkpoint saves v (anything encoding/json accepts) as the task's last
// checkpoint, which a worker that takes the task over reads with
// LastCheckpoint. It is fenced: once another worker has taken the task
// over, the write is refused with an error, and the handler should stop.
func (e *Execution) Checkpoint(ctx context.Context, v any) error {
	return e.t.checkpoint(ctx, e.rec, e.fence, e.Attempt, v)
}

// SetMessage sets the task's statusMessage, which tasks/get shows (such
// as progress: "frame 3 of 8"). It is fenced as Checkpoint is.
func (e *Execution) SetMessage(ctx context.Context, msg string) error {
	_, err := e.t.write(ctx, e.rec, e.fence, e.Attempt, false, func(r *record) { r.Message = msg })
	return err
}

// LastCheckpoint returns the task's last checkpoint (as JSON) and whether
// there is one.
func (e *Execution) LastCheckpoint(ctx context.Context) (json.RawMessage, bool, error) {
	return e.t.lastCheckpoint(ctx, e.TaskID)
}
