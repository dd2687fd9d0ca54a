package mcptasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/statesidecar/state"
)

// runCall runs the task's call through the server and records its outcome,
// going through input rounds (2026-07-28 inputRequests) as the call asks
// for them; it returns the status recorded. Once ctx ends it records
// nothing.
func (t *Tasks) runCall(ctx context.Context, exe *Execution, rec *record, changed <-chan struct{}) (string, error) {
	var answers map[string]json.RawMessage
	var reqState string
	if rec.Status == StatusInputRequired && rec.Input != nil {
		// Taken over while waiting for input: wait for it, then go on.
		var err error
		if rec, answers, reqState, err = t.awaitInput(ctx, exe, rec, changed); err != nil {
			return "", err
		}
	}
	for {
		msg, err := t.callMessage(rec, answers, reqState)
		if err != nil {
			return "", err
		}
		resp := t.srv.HandleMessage(ctx, msg)
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		out := classify(resp)
		if out.retry != nil {
			// Load shedding: the call asks to be sent again with its state.
			answers, reqState = map[string]json.RawMessage{}, *out.retry
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(t.o.PollInterval):
			}
			continue
		}
		if out.input != nil {
			round := out.input
			if rec, err = t.write(ctx, rec, exe.fence, exe.Attempt, false, func(r *record) {
				round.Round = r.Rounds + 1
				round.prefix()
				r.Rounds, r.Status, r.Message, r.Input = round.Round, StatusInputRequired, "", round
			}); err != nil {
				return "", err
			}
			if rec, answers, reqState, err = t.awaitInput(ctx, exe, rec, changed); err != nil {
				return "", err
			}
			continue
		}
		if _, err := t.write(ctx, rec, exe.fence, exe.Attempt, true, func(r *record) {
			r.Status, r.Message, r.Input = out.status, out.message, nil
			r.Result, r.Error = out.result, out.error
		}); err != nil {
			return "", err
		}
		if out.status == StatusFailed {
			t.observe(EventFailed)
		} else {
			t.observe(EventCompleted)
		}
		return out.status, nil
	}
}

// awaitInput waits until every request of the task's input round has an
// answer, then puts the task back to working and returns the answers under
// the handler's own keys, with its request state.
func (t *Tasks) awaitInput(ctx context.Context, exe *Execution, rec *record, changed <-chan struct{}) (*record, map[string]json.RawMessage, string, error) {
	for {
		e, err := t.st.Get(ctx, taskKey(rec.ID))
		if err != nil {
			if errors.Is(err, state.ErrNotFound) {
				return nil, nil, "", errNoTask
			}
			return nil, nil, "", err
		}
		cur, err := decodeRecord(e.Value)
		if err != nil {
			return nil, nil, "", err
		}
		if in := cur.Input; in != nil && in.answered() {
			answers := make(map[string]json.RawMessage, len(in.Responses))
			for k, v := range in.Responses {
				answers[in.Keys[k]] = v
			}
			rec, err = t.write(ctx, cur, exe.fence, exe.Attempt, false, func(r *record) {
				r.Status, r.Input = StatusWorking, nil
			})
			return rec, answers, in.State, err
		}
		select {
		case <-ctx.Done():
			return nil, nil, "", ctx.Err()
		case <-changed:
		}
	}
}

// callMessage is the tools/call the task runs: the client's params,
// without the task request, with the answers of an input round, as a
// client of the task's protocol version would have sent it.
func (t *Tasks) callMessage(rec *record, answers map[string]json.RawMessage, requestState string) ([]byte, error) {
	var params map[string]json.RawMessage
	if err := json.Unmarshal(rec.Params, &params); err != nil {
		return nil, fmt.Errorf("stored params: %w", err)
	}
	delete(params, "task")
	delete(params, "inputResponses")
	delete(params, "requestState")
	if meta, ok := params["_meta"]; ok {
		params["_meta"] = withoutExtension(meta)
	}
	if answers != nil {
		b, err := json.Marshal(answers)
		if err != nil {
			return nil, err
		}
		params["inputResponses"] = b
		if requestState != "" {
			params["requestState"], _ = json.Marshal(requestState)
		}
	}
	p, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	// A request id nobody can guess (not the task's id): a
	// notifications/cancelled naming it would cancel the call in mcp-go,
	// past this package's owner check.
	msg, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "mcptasks-" + newID(),
		"method": "tools/call", "params": json.RawMessage(p)})
	if err != nil {
		return nil, err
	}
	if t.o.Prepare != nil {
		msg = t.o.Prepare(msg)
	}
	return msg, nil
}

// withoutExtension removes the tasks extension from the client
// capabilities in meta, so that the call runs as a plain call.
func withoutExtension(meta json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return meta
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(m[metaCapabilities], &caps) != nil {
		return meta
	}
	var ext map[string]json.RawMessage
	if json.Unmarshal(caps["extensions"], &ext) != nil {
		return meta
	}
	delete(ext, ExtensionID)
	caps["extensions"], _ = json.Marshal(ext)
	m[metaCapabilities], _ = json.Marshal(caps)
	out, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return out
}

// An outcome is what a call's response means for its task.
type outcome struct {
	status  string
	message string
	result  json.RawMessage
	error   json.RawMessage
	input   *inputRound
	retry   *string // the request state of an input_required without requests
}

// classify reads the server's response to a task's call: a JSON-RPC error
// fails the task (and only that: a result with isError true completes it);
// a result of type input_required asks for input; any other result
// completes it, stored exactly as the call returned it.
func classify(resp any) outcome {
	b, err := json.Marshal(resp)
	if err != nil || resp == nil {
		return outcome{status: StatusFailed, message: "Tool execution failed: no response",
			error: json.RawMessage(`{"code":-32603,"message":"the tool call gave no response"}`)}
	}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(b, &m); err != nil || (len(m.Result) == 0 && len(m.Error) == 0) {
		return outcome{status: StatusFailed, message: "Tool execution failed: unreadable response",
			error: json.RawMessage(`{"code":-32603,"message":"the tool call gave an unreadable response"}`)}
	}
	if len(m.Error) > 0 && string(m.Error) != "null" {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(m.Error, &e)
		return outcome{status: StatusFailed, message: "Tool execution failed: " + e.Message, error: m.Error}
	}
	var r struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if json.Unmarshal(m.Result, &r) == nil && r.ResultType == "input_required" {
		if len(r.InputRequests) == 0 {
			return outcome{retry: &r.RequestState}
		}
		return outcome{input: &inputRound{Requests: r.InputRequests, State: r.RequestState}}
	}
	return outcome{status: StatusCompleted, result: m.Result}
}

// prefix renames the round's requests with the round's number, so that a
// key is never used for two requests over the task's life (a handler may
// reuse its own keys from round to round).
func (r *inputRound) prefix() {
	reqs := make(map[string]json.RawMessage, len(r.Requests))
	r.Keys = make(map[string]string, len(r.Requests))
	for k := range r.Requests {
		p := "r" + strconv.Itoa(r.Round) + "." + k
		reqs[p], r.Keys[p] = r.Requests[k], k
	}
	r.Requests = reqs
}
