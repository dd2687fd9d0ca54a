package mcpadapter

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ServerName is the name NewServer gives its server, the Python sidecar's.
const ServerName = "MCP State Sidecar"

// Options configure the tools. A nil *Options means defaults.
type Options struct {
	// Prefix is prepended to every tool name; "" keeps the Python names. It
	// may contain only letters, digits, '_', '-' and '.'.
	Prefix string
	// Tools lists the unprefixed names of the tools to expose (see
	// ToolNames); nil means all 21.
	Tools []string
	// AllowReset lets sidecar_reset wipe the namespace; without it the tool
	// answers with a tool error.
	AllowReset bool
	// AllowErase adds the admin tool sidecar_erase after the 21 (see
	// AdminToolNames): erasure of a subject (encryption at rest needed) or
	// of the whole namespace. Without it the tool is not offered.
	AllowErase bool
	// SubjectFromPrincipal makes the caller's principal (its token's
	// subject, Caller.Principal) the subject of every write of its calls
	// (state.ContextWithSubject), so that sidecar_erase with that subject
	// erases everything the caller's tools wrote. It needs encryption at
	// rest: without it those writes fail.
	SubjectFromPrincipal bool
	// ClaimTTL is the claim TTL workflow_claim uses when the call gives no
	// claim_ttl_seconds; 0 means the store's own default.
	ClaimTTL time.Duration
	// Observe, if set, is called after every tool call with the unprefixed
	// tool name, how long it took and whether the result was a tool error
	// (for metrics). It must be safe for concurrent use.
	Observe func(tool string, took time.Duration, isError bool)
	// TracerProvider, if set, gives every tool call an OpenTelemetry span
	// of kind server named "tools/call <tool>", with the attributes of
	// OpenTelemetry's MCP conventions (mcp.method.name, gen_ai.tool.name,
	// gen_ai.operation.name, and error.type "tool_error" with an error
	// status for a tool error) and state.namespace and state.outcome ("ok",
	// or the kind of error: not_found, conflict, invalid_argument,
	// forbidden...), and, for a call with a Caller, user.id (its principal)
	// and state.access. No
	// argument or result is recorded. The parent is the trace context in
	// the call's params._meta (traceparent, tracestate, baggage) if any,
	// with the span context in the call's context as a link; else the span
	// context in the call's context (the sidecar puts an HTTP request's
	// traceparent header there). Backend calls are children of the tool's
	// span when the store traces them (state.Options.Tracer, package
	// otelstate). Without it a call does no tracing work at all.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context of params._meta. Defaults to W3C
	// Trace Context and Baggage.
	Propagator propagation.TextMapPropagator
	// Authorize, if set, decides whether a tool call may run and whether
	// tools/list shows the tool: tool is the unprefixed name and need the
	// access the tool needs (ToolAccess); the caller, if the host
	// authenticated one, is CallerFrom(ctx). A non-nil error refuses the
	// call with a tool error showing the error's text (wrap ErrForbidden).
	// Without it, a call with a Caller in its context (WithCaller) runs
	// only if the caller's Access covers need, and one without runs.
	Authorize func(ctx context.Context, tool string, need Access) error
	// Logger receives the details of failures that clients are not shown:
	// a tool error caused by the backend tells the client only a stable
	// message and an error id, and logs the error with that id. Defaults
	// to slog.Default().
	Logger *slog.Logger
}

func (o *Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// ToolNames returns the names of the 21 tools, unprefixed: the Python
// sidecar's 19 in the order it registers them, then the long-polls
// state_wait and workflow_wait.
func ToolNames() []string {
	names := make([]string, len(table))
	for i := range table {
		names[i] = table[i].name
	}
	return names
}

// Tools returns the tools selected by opts, in ToolNames order, each
// working on st (or on the namespace WithNamespace puts in a call's
// context). It has no side effects: the host may inspect, filter or wrap the
// tools before adding them to a server. It panics if st is nil, if
// opts.Tools names an unknown tool or if opts.Prefix makes invalid names.
func Tools(st *state.Store, opts *Options) []server.ServerTool {
	if st == nil {
		panic("mcpadapter: Tools called with a nil *state.Store")
	}
	o := &Options{}
	if opts != nil {
		c := *opts
		o = &c
	}
	if err := checkPrefix(o.Prefix); err != nil {
		panic("mcpadapter: " + err.Error())
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = st.ClaimTTL() // so the schema can state the default
	}
	all := ToolNames()
	for _, n := range o.Tools {
		if !slices.Contains(all, n) {
			panic(fmt.Sprintf("mcpadapter: Options.Tools names unknown tool %q; the tools are %s", n, strings.Join(all, ", ")))
		}
	}
	var out []server.ServerTool
	for i := range table {
		t := &table[i]
		if o.Tools == nil || slices.Contains(o.Tools, t.name) {
			out = append(out, t.serverTool(st, o))
		}
	}
	if o.AllowErase {
		out = append(out, eraseTool.serverTool(st, o))
	}
	return out
}

// checkPrefix accepts prefixes that keep tool names within the characters
// every MCP host accepts.
func checkPrefix(p string) error {
	if len(p) > 64 {
		return fmt.Errorf("Options.Prefix %q is longer than 64 bytes", p)
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Errorf("Options.Prefix %q may contain only letters, digits, '_', '-' and '.'", p)
		}
	}
	return nil
}

// Register adds the tools selected by opts to s in one batch, so that
// clients get a single list-changed notification. A tool of s with the same
// name is replaced. It panics as Tools does.
func Register(s *server.MCPServer, st *state.Store, opts *Options) {
	s.AddTools(Tools(st, opts)...)
}

// NewServer returns an MCP server named ServerName, at version
// state.Version, with instructions that explain the tools' workflow, tool
// capabilities, panic recovery, a tools/list that shows each caller only
// the tools it may call (AddListFilter), and the tools selected by opts over
// st. serverOpts are applied after those.
func NewServer(st *state.Store, opts *Options, serverOpts ...server.ServerOption) *server.MCPServer {
	hooks := &server.Hooks{}
	AddListFilter(hooks, opts)
	so := append([]server.ServerOption{
		server.WithHooks(hooks),
		server.WithToolCapabilities(false),
		server.WithInstructions(Instructions),
		server.WithRecovery(),
	}, serverOpts...)
	s := server.NewMCPServer(ServerName, state.Version, so...)
	Register(s, st, opts)
	return s
}

// Instructions is what NewServer tells clients about using the tools.
const Instructions = `Durable coordination state shared by agents: it survives agent crashes, restarts and scaling out.

Key-value: state_set / state_get / state_delete / state_list store JSON values with optional TTL. For a safe read-modify-write pass state_get's version as if_version to state_set.

Workflows (create → discover → claim → checkpoint → resume):
1. An orchestrator registers work with workflow_create(name, tags).
2. Workers find it with workflow_discover(tags, claimable=true) and take it with workflow_claim(run_id, agent_id). Exactly one racing worker wins; the others get claimed=false and move on.
3. A claim expires after its TTL (claim_ttl_seconds) unless the worker sends heartbeats: every workflow_checkpoint is one, and so is workflow_claim by the holder. When a worker crashes its claim expires and another worker can claim the run (attempt goes up, a larger fence is issued).
4. After claiming, call workflow_resume(run_id) and continue after last_step, using the saved step_outputs.
5. Save each step with workflow_checkpoint(run_id, step, output, agent_id, fence). With agent_id and fence the write is refused once your claim was taken over, so a stale worker cannot overwrite its successor: stop working on the run then.
6. Finish the run with a last workflow_checkpoint with status "done" (or "failed"); finished runs cannot be claimed or checkpointed again.

Leases: lease_acquire(resource_id, holder_id, ttl_seconds) is an exclusive lock that expires; acquiring again as the holder extends it, lease_renew extends it too, lease_release frees it. Give its fence to whatever it protects.

Sessions: session_save / session_restore keep snapshots of conversational context. history_log is the audit trail of every change. sidecar_health reports counts; sidecar_reset wipes everything and is normally disabled.`
