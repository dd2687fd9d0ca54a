package mcptasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/statesidecar/state"
)

// Errors of the task store. A request for a task that does not exist, has
// expired or belongs to another owner gets errNoTask in every case, so that
// nobody learns whether someone else's task exists.
var (
	errNoTask = errors.New("task not found or expired")
	// errTooMany: the owner has Options.MaxLive unfinished tasks.
	errTooMany = errors.New("too many live tasks")
	// errFinished: the task is completed, failed or cancelled already.
	errFinished = errors.New("task already finished")
	// errStale: a worker with a greater fence wrote the task: the caller's
	// claim was taken over.
	errStale = errors.New("claim taken over by another worker")
)

// A TerminalError reports a cancellation of a task that had finished.
type terminalError struct{ status string }

func (e *terminalError) Error() string {
	return fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", e.status)
}

func (e *terminalError) Unwrap() error { return errFinished }

// now is the time of the task store.
func (t *Tasks) now() time.Time {
	if t.o.Clock != nil {
		return t.o.Clock.Now()
	}
	return time.Now()
}

// create makes a task of owner for a call of tool with params, living ttl:
// its run first (a run without a record is failed by whoever claims it),
// then, in one atomic write, the record, its listing entry and its place in
// the owner's count of live tasks. When create returns, tasks/get on any
// replica finds the task.
func (t *Tasks) create(ctx context.Context, owner Owner, version, tool string, params json.RawMessage, ttl time.Duration) (*record, error) {
	id := newID()
	run, err := t.st.CreateRun(ctx, id, nil, state.WithAgent(t.worker))
	if err != nil {
		return nil, err
	}
	now := t.now()
	rec := &record{ID: id, Owner: owner, Version: version, Tool: tool, Params: params, Run: run.ID,
		Status: StatusWorking, CreatedMs: now.UnixMilli(), UpdatedMs: now.UnixMilli(),
		TTLMs: ttl.Milliseconds(), PollMs: t.o.PollInterval.Milliseconds()}
	val, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	exp := rec.CreatedMs + rec.TTLMs
	_, err = t.st.Update(ctx, []string{liveKey(owner)}, func(cur []state.Entry) ([]state.Write, error) {
		live, err := decodeLive(cur[0])
		if err != nil {
			return nil, err
		}
		last := live.prune(now.UnixMilli())
		if len(live.Tasks) >= t.o.MaxLive {
			return nil, errTooMany
		}
		live.Tasks[id] = exp
		return []state.Write{
			{Key: taskKey(id), Value: json.RawMessage(val), TTL: ttl, Private: true},
			{Key: listKey(owner, rec.CreatedMs, id), Value: json.RawMessage("0"), TTL: ttl, Private: true},
			{Key: liveKey(owner), Value: live, TTL: time.Duration(max(last, exp)-now.UnixMilli()) * time.Millisecond, Private: true},
		}, nil
	})
	if err != nil {
		// Nobody will run the task: end its run now rather than when a
		// sweeper finds it.
		ctx := context.WithoutCancel(ctx)
		if _, ferr := t.st.FailRun(ctx, run.ID); ferr == nil {
			_, _ = t.st.DeleteRun(ctx, run.ID, state.WithAgent(t.worker))
		}
		return nil, err
	}
	return rec, nil
}

// Live returns how many of owner's tasks are unfinished (working or
// input_required) and not expired: the number Options.MaxLive bounds. A
// host may use it for limits of its own (per tenant, say).
func (t *Tasks) Live(ctx context.Context, owner Owner) (int, error) {
	e, err := t.st.Get(ctx, liveKey(owner))
	if errors.Is(err, state.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	live, err := decodeLive(e)
	if err != nil {
		return 0, err
	}
	live.prune(t.now().UnixMilli())
	return len(live.Tasks), nil
}

// decodeLive reads an owner's live set; a missing one is empty.
func decodeLive(e state.Entry) (*liveSet, error) {
	l := &liveSet{Tasks: map[string]int64{}}
	if !e.Found() {
		return l, nil
	}
	if err := json.Unmarshal(e.Value, l); err != nil {
		return nil, fmt.Errorf("stored live task set is corrupt: %w", err)
	}
	if l.Tasks == nil {
		l.Tasks = map[string]int64{}
	}
	return l, nil
}

// get returns owner's task id and the version of its record (to wait for
// the next change with WaitKey).
func (t *Tasks) get(ctx context.Context, owner Owner, id string) (*record, int64, error) {
	if !validID(id) {
		return nil, 0, errNoTask
	}
	e, err := t.st.Get(ctx, taskKey(id))
	if errors.Is(err, state.ErrNotFound) {
		return nil, 0, errNoTask
	}
	if err != nil {
		return nil, 0, err
	}
	rec, err := decodeRecord(e.Value)
	if err != nil {
		return nil, 0, err
	}
	if rec.Owner != owner {
		return nil, 0, errNoTask
	}
	return rec, e.Version, nil
}

// list returns a page of owner's tasks, newest first, and the cursor of the
// next page ("" after the last).
func (t *Tasks) list(ctx context.Context, owner Owner, cursor string, limit int) ([]*record, string, error) {
	opts := []state.ListOption{state.WithLimit(limit)}
	if cursor != "" {
		opts = append(opts, state.WithCursor(cursor))
	}
	page, err := t.st.List(ctx, listPrefix(owner), opts...)
	if err != nil {
		return nil, "", err
	}
	keys := make([]string, len(page.Keys))
	for i, k := range page.Keys {
		keys[i] = taskKey(idFromListKey(k))
	}
	var out []*record
	if len(keys) > 0 {
		es, err := t.st.GetMany(ctx, keys)
		if err != nil {
			return nil, "", err
		}
		for _, e := range es {
			if !e.Found() {
				continue // expired between the two reads
			}
			rec, err := decodeRecord(e.Value)
			if err != nil {
				return nil, "", err
			}
			if rec.Owner == owner {
				out = append(out, rec)
			}
		}
	}
	return out, page.NextCursor, nil
}

// cancel marks owner's unfinished task id cancelled and returns it; a
// finished one is returned unchanged with a *terminalError.
func (t *Tasks) cancel(ctx context.Context, owner Owner, id string) (*record, error) {
	if !validID(id) {
		return nil, errNoTask
	}
	var out *record
	_, err := t.st.Update(ctx, []string{taskKey(id), liveKey(owner)}, func(cur []state.Entry) ([]state.Write, error) {
		rec, err := t.liveRecord(cur[0])
		if err != nil {
			return nil, err
		}
		if rec.Owner != owner {
			return nil, errNoTask
		}
		out = rec
		if terminal(rec.Status) {
			return nil, &terminalError{status: rec.Status}
		}
		now := t.now()
		rec.Status, rec.Message, rec.Input = StatusCancelled, "The task was cancelled by request.", nil
		rec.UpdatedMs = now.UnixMilli()
		w, err := t.recordWrite(rec, now)
		if err != nil {
			return nil, err
		}
		return append([]state.Write{w}, t.leaveLive(cur[1], id, now)...), nil
	})
	return out, err
}

// liveRecord decodes the record of an entry an Update read; errNoTask when
// it is missing or expired.
func (t *Tasks) liveRecord(e state.Entry) (*record, error) {
	if !e.Found() {
		return nil, errNoTask
	}
	rec, err := decodeRecord(e.Value)
	if err != nil {
		return nil, err
	}
	if rec.ttlLeft(t.now()) <= 0 {
		return nil, errNoTask
	}
	return rec, nil
}

// recordWrite is the write of rec with the rest of its lifetime.
func (t *Tasks) recordWrite(rec *record, now time.Time) (state.Write, error) {
	left := rec.ttlLeft(now)
	if left <= 0 {
		return state.Write{}, errNoTask
	}
	val, err := json.Marshal(rec)
	if err != nil {
		return state.Write{}, err
	}
	return state.Write{Key: taskKey(rec.ID), Value: json.RawMessage(val), TTL: left, Private: true}, nil
}

// leaveLive takes task id out of the live set e (read by an Update): no
// write when it is not in it.
func (t *Tasks) leaveLive(e state.Entry, id string, now time.Time) []state.Write {
	live, err := decodeLive(e)
	if err != nil || !e.Found() {
		return nil
	}
	if _, ok := live.Tasks[id]; !ok {
		return nil
	}
	delete(live.Tasks, id)
	last := live.prune(now.UnixMilli())
	if len(live.Tasks) == 0 {
		return []state.Write{{Key: e.Key, Delete: true, Private: true}}
	}
	return []state.Write{{Key: e.Key, Value: live, TTL: time.Duration(last-now.UnixMilli()) * time.Millisecond, Private: true}}
}

// answer records inputResponses for owner's task id: only answers to
// requests that are outstanding count; the others are ignored, as are
// answers to a task that is not waiting for input (2026-07-28: tasks/update
// is eventually consistent).
func (t *Tasks) answer(ctx context.Context, owner Owner, id string, responses map[string]json.RawMessage) error {
	if !validID(id) {
		return errNoTask
	}
	_, err := t.st.Update(ctx, []string{taskKey(id)}, func(cur []state.Entry) ([]state.Write, error) {
		rec, err := t.liveRecord(cur[0])
		if err != nil {
			return nil, err
		}
		if rec.Owner != owner {
			return nil, errNoTask
		}
		in := rec.Input
		if rec.Status != StatusInputRequired || in == nil {
			return nil, nil
		}
		added := false
		for k, v := range responses {
			if _, asked := in.Requests[k]; !asked {
				continue
			}
			if _, done := in.Responses[k]; done {
				continue
			}
			if in.Responses == nil {
				in.Responses = map[string]json.RawMessage{}
			}
			in.Responses[k], added = v, true
		}
		if !added {
			return nil, nil
		}
		now := t.now()
		rec.UpdatedMs = now.UnixMilli()
		w, err := t.recordWrite(rec, now)
		return []state.Write{w}, err
	})
	return err
}

// write applies change to task id as the worker holding fence (of claim
// attempt attempt): refused with errStale when a worker with a greater
// fence wrote it, errFinished when it has finished, errNoTask when it has
// expired. finishing takes it out of its owner's live set in the same write.
// extra are written too.
func (t *Tasks) write(ctx context.Context, rec *record, fence, attempt int64, finishing bool, change func(*record), extra ...state.Write) (*record, error) {
	keys := []string{taskKey(rec.ID)}
	if finishing {
		keys = append(keys, liveKey(rec.Owner))
	}
	var out *record
	_, err := t.st.Update(ctx, keys, func(cur []state.Entry) ([]state.Write, error) {
		r, err := t.liveRecord(cur[0])
		if err != nil {
			return nil, err
		}
		if terminal(r.Status) {
			return nil, errFinished
		}
		if r.Fence > fence {
			return nil, errStale
		}
		now := t.now()
		r.Fence, r.Attempt, r.UpdatedMs = fence, attempt, now.UnixMilli()
		change(r)
		w, err := t.recordWrite(r, now)
		if err != nil {
			return nil, err
		}
		out = r
		ws := append([]state.Write{w}, extra...)
		if finishing {
			ws = append(ws, t.leaveLive(cur[1], r.ID, now)...)
		}
		return ws, nil
	})
	return out, err
}

// checkpoint stores v as the last checkpoint of task rec, written by the
// worker holding fence.
func (t *Tasks) checkpoint(ctx context.Context, rec *record, fence, attempt int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("checkpoint value: %w", err)
	}
	left := rec.ttlLeft(t.now())
	if left <= 0 {
		return errNoTask
	}
	_, err = t.write(ctx, rec, fence, attempt, false, func(*record) {},
		state.Write{Key: checkpointKey(rec.ID), Value: json.RawMessage(b), TTL: left, Private: true})
	return err
}

// lastCheckpoint returns the last checkpoint of task id, if any.
func (t *Tasks) lastCheckpoint(ctx context.Context, id string) (json.RawMessage, bool, error) {
	e, err := t.st.Get(ctx, checkpointKey(id))
	if errors.Is(err, state.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return e.Value, true, nil
}
