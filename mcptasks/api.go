package mcptasks

import (
	"context"
	"time"
)

// Errors of the Go API (Get, List, Cancel). ErrNotFound is also what
// another owner's task gives: whether it exists is not told.
var (
	ErrNotFound = errNoTask
	ErrFinished = errFinished
)

// A Task is a task as its owner sees it, for hosts and consoles (the
// protocols' views are built from the same record).
type Task struct {
	ID   string
	Tool string
	// Status is working, input_required, completed, failed or cancelled.
	Status    string
	Message   string
	CreatedAt time.Time
	UpdatedAt time.Time
	ExpiresAt time.Time
	// Attempt is the attempt of the worker that wrote the task last (0
	// until one did).
	Attempt int64
}

func (r *record) task() Task {
	return Task{ID: r.ID, Tool: r.Tool, Status: r.Status, Message: r.Message, CreatedAt: time.UnixMilli(r.CreatedMs),
		UpdatedAt: time.UnixMilli(r.UpdatedMs), ExpiresAt: r.expiresAt(), Attempt: r.Attempt}
}

// Get returns owner's task id, or an error matching ErrNotFound.
func (t *Tasks) Get(ctx context.Context, owner Owner, id string) (Task, error) {
	rec, _, err := t.get(ctx, owner, id)
	if err != nil {
		return Task{}, err
	}
	return rec.task(), nil
}

// List returns a page of owner's tasks, newest first, and the cursor of the
// next page ("" after the last).
func (t *Tasks) List(ctx context.Context, owner Owner, cursor string) ([]Task, string, error) {
	recs, next, err := t.list(ctx, owner, cursor, listPage)
	out := make([]Task, len(recs))
	for i, r := range recs {
		out[i] = r.task()
	}
	return out, next, err
}

// Cancel cancels owner's task id, as tasks/cancel does, and returns it: an
// error matching ErrNotFound when there is no such task, ErrFinished when
// it had finished (it is then returned as it is).
func (t *Tasks) Cancel(ctx context.Context, owner Owner, id string) (Task, error) {
	rec, err := t.cancel(ctx, owner, id)
	if rec == nil {
		return Task{}, err
	}
	if err == nil {
		t.observe(EventCancelled)
	}
	return rec.task(), err
}
