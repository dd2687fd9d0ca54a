package mcpadapter

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"go.opentelemetry.io/otel/trace"
)

// A tool is one of the 21 tools: what the model sees, and the function that
// translates its arguments to a Go call and the call's result to a value
// that encodes as the tool's result.
type tool struct {
	name   string // the Python name, without prefix
	title  string
	desc   string
	params []param
	hints  hints
	// result is a zero value of the type run returns; the output schema is
	// derived from it.
	result any
	run    func(ctx context.Context, st *state.Store, a args, o *Options) (any, error)
}

// hints are a tool's annotations; no tool is open-world.
type hints struct {
	readOnly, destructive, idempotent bool
}

// takes lists the tool's parameters, for the error about an unknown one.
func (t *tool) takes() string {
	if len(t.params) == 0 {
		return "this tool takes no arguments"
	}
	names := make([]string, len(t.params))
	for i, p := range t.params {
		names[i] = p.name
	}
	return "this tool takes " + strings.Join(names, ", ")
}

// hasParam reports whether the tool takes a parameter named name.
func (t *tool) hasParam(name string) bool {
	return slices.ContainsFunc(t.params, func(p param) bool { return p.name == name })
}

// serverTool builds the mcp-go tool named prefix+t.name over st.
func (t *tool) serverTool(st *state.Store, o *Options) server.ServerTool {
	name := o.Prefix + t.name
	mt := mcp.Tool{
		Name:            name,
		Title:           t.title,
		Description:     t.desc,
		RawInputSchema:  inputSchema(t, o),
		RawOutputSchema: outputSchema(t.result),
		Annotations: mcp.ToolAnnotation{
			Title:           t.title,
			ReadOnlyHint:    mcp.ToBoolPtr(t.hints.readOnly),
			DestructiveHint: mcp.ToBoolPtr(t.hints.destructive),
			IdempotentHint:  mcp.ToBoolPtr(t.hints.idempotent),
			OpenWorldHint:   mcp.ToBoolPtr(false),
		},
	}
	return server.ServerTool{Tool: mt, Handler: t.handler(st, o, name, newTracing(o))}
}

// handler returns the tool's mcp-go handler. It never returns a Go error:
// bad arguments, store errors and panics all become tool error results.
// With tr, each call runs in a span of its own.
func (t *tool) handler(st *state.Store, o *Options, name string, tr *tracing) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
		start := time.Now()
		var span trace.Span
		if tr != nil {
			ctx, span = tr.start(ctx, st, name, req)
		}
		failed := ""
		defer func() {
			if r := recover(); r != nil {
				err := fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				res, failed = failure(name, internal(ctx, o.logger(), name, err, "internal error: the tool panicked")), "panic"
			}
			if span != nil {
				tr.end(span, res, failed)
			}
			if o.Observe != nil {
				o.Observe(t.name, time.Since(start), res.IsError)
			}
		}()
		v, err := t.call(ctx, st, o, req)
		if err != nil {
			if span != nil {
				failed = outcome(err)
			}
			return failure(name, message(ctx, o.logger(), name, err)), nil
		}
		return success(v), nil
	}
}

// call runs the tool and returns its encoded result.
func (t *tool) call(ctx context.Context, st *state.Store, o *Options, req mcp.CallToolRequest) ([]byte, error) {
	if err := o.authorize(ctx, t.name, accessOf(t)); err != nil {
		return nil, err
	}
	if c, ok := CallerFrom(ctx); ok && c.Principal != "" {
		if _, set := state.PrincipalFrom(ctx); !set {
			ctx = state.WithPrincipal(ctx, c.Principal) // history records who
		}
		if o.SubjectFromPrincipal {
			ctx = state.ContextWithSubject(ctx, c.Principal) // whose data the writes are
		}
	}
	raw, err := rawArguments(req)
	if err != nil {
		return nil, err
	}
	a, err := parseArgs(t, raw)
	if err != nil {
		return nil, err
	}
	if ns, ok := NamespaceFrom(ctx); ok {
		if st, err = st.Namespace(ns); err != nil {
			return nil, err
		}
	}
	v, err := t.run(ctx, st, a, o)
	if err != nil {
		return nil, err
	}
	return encode(v)
}

// rawArguments returns the call's arguments as the JSON the client sent,
// which keeps every digit of its numbers and every byte of its strings
// (PrepareMessage may have wrapped them). A request built in Go without a
// wire message has only the decoded Arguments; they are re-encoded.
func rawArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if raw, ok := unwrapArguments(req.Params.Arguments); ok {
		return raw, nil
	}
	if len(req.Params.RawArguments) > 0 {
		return req.Params.RawArguments, nil
	}
	switch a := req.Params.Arguments.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return a, nil
	}
	b, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil, badArg("arguments cannot be read as JSON: %v", err)
	}
	return b, nil
}
