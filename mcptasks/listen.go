package mcptasks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
)

// maxListenTasks bounds the tasks one subscriptions/listen follows.
const maxListenTasks = 100

// A listen is a subscriptions/listen the front may take: one asking for
// task notifications (2026-07-28: notifications/tasks for params.
// notifications.taskIds).
type listenRequest struct {
	Notifications map[string]json.RawMessage `json:"notifications"`
	Meta          map[string]json.RawMessage `json:"_meta"`
}

// planListen decides about a subscriptions/listen: refuse it (-32021: task
// ids asked for by a client without the extension), serve it (the ids it
// asks for, when it asks for task notifications and nothing else), or
// leave it to mcp-go (ok false), which acknowledges no task ids.
func planListen(req *request, header http.Header) (refuse *answer, ids []string, ok bool) {
	var p listenRequest
	if json.Unmarshal(req.Params, &p) != nil {
		return nil, nil, false
	}
	raw, asked := p.Notifications["taskIds"]
	if !asked {
		return nil, nil, false
	}
	pp := &params{Meta: p.Meta}
	if !pp.declared() {
		a := missingCapability(req.ID)
		return &a, nil, true
	}
	version := pp.version()
	if !mcp.IsModernProtocol(version) || len(p.Notifications) != 1 ||
		!modernHeaders(header, version, "subscriptions/listen", req.Params, nil) {
		return nil, nil, false // other kinds too, or bad headers: mcp-go's
	}
	if json.Unmarshal(raw, &ids) != nil {
		a := failure(req.ID, true, codeInvalidParams, "params.notifications.taskIds must be an array of strings", nil)
		return &a, nil, true
	}
	return nil, ids, true
}

// listen serves a subscriptions/listen for task notifications: it
// acknowledges the caller's own tasks among ids (the others are not
// agreed to, as if unknown), then sends a notifications/tasks with the
// DetailedTask (what tasks/get answers) now and at every change of each,
// from any replica (the store's WaitKey), until each is finished or gone;
// then it answers the request. It ends early when ctx does. emit sends one
// message on the request's stream.
func (t *Tasks) listen(ctx context.Context, req *request, ids []string, emit func([]byte)) answer {
	owner, err := t.o.Owner(ctx)
	if err != nil {
		return failure(req.ID, true, codeInvalidRequest, err.Error(), nil)
	}
	subMeta := map[string]json.RawMessage{mcp.MetaKeySubscriptionID: req.ID}
	type seen struct {
		rec     *record
		version int64
	}
	var agreed []string
	var first []seen
	for _, id := range ids {
		if len(agreed) == maxListenTasks {
			break
		}
		rec, version, err := t.get(ctx, owner, id)
		if err != nil {
			continue
		}
		dup := false
		for _, a := range agreed {
			dup = dup || a == id
		}
		if !dup {
			agreed = append(agreed, id)
			first = append(first, seen{rec, version})
		}
	}
	if agreed == nil {
		agreed = []string{}
	}
	ack, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": mcp.MethodNotificationSubscriptionsAcknowledged,
		"params": map[string]any{"_meta": subMeta, "notifications": map[string]any{"taskIds": agreed}}})
	emit(ack)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(t.ctx, cancel)()
	changes := make(chan *record)
	done := make(chan struct{}, len(first))
	for _, s := range first {
		go func() {
			defer func() { done <- struct{}{} }()
			rec, version := s.rec, s.version
			for {
				select {
				case changes <- rec:
				case <-ctx.Done():
					return
				}
				if terminal(rec.Status) {
					return
				}
				e, err := t.st.WaitKey(ctx, taskKey(rec.ID), version)
				if err != nil || !e.Found() {
					if err != nil && !errors.Is(err, state.ErrNotFound) && ctx.Err() == nil {
						t.log.Warn("mcptasks: following a task for subscriptions/listen failed", "err", err)
					}
					return
				}
				if rec, err = decodeRecord(e.Value); err != nil {
					return
				}
				version = e.Version
			}
		}()
	}
	for left := len(first); left > 0; {
		select {
		case rec := <-changes:
			n := rec.modern("", true)
			b, _ := json.Marshal(struct {
				Meta map[string]json.RawMessage `json:"_meta"`
				modernTask
			}{subMeta, n})
			emit(envelopeNotification(b))
		case <-done:
			left--
		case <-ctx.Done():
			return failure(req.ID, true, codeInternal, "The subscription ended: the request or the server stopped", nil)
		}
	}
	return result(req.ID, map[string]any{"resultType": "complete", "_meta": subMeta})
}

// envelopeNotification writes a notifications/tasks with params p.
func envelopeNotification(p []byte) []byte {
	return append(append([]byte(`{"jsonrpc":"2.0","method":"notifications/tasks","params":`), p...), '}')
}
