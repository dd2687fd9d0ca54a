// Package mcpadapter turns a *state.Store into MCP tools: the 19 tools of
// the Python "MCP State Sidecar" (mcp-state-sidecar 0.1.0), as a drop-in: the
// same tool names, parameter names, required flags and result fields, with
// new parameters optional and new result fields added after the old ones;
// and two long-polls, state_wait and workflow_wait, which wait for a key or
// a run to change instead of polling (see LongPollTimeout).
//
// Build a ready server with NewServer, or mount the tools on a server you
// already have with Register (or Tools, to inspect or filter them first):
//
//	s := server.NewMCPServer("my-agent-tools", "1.0.0", server.WithRecovery())
//	s.AddTool(myTool, myHandler)
//	mcpadapter.Register(s, st, &mcpadapter.Options{Prefix: "state."})
//
// # Results
//
// Every tool returns its result as structured content and the same compact
// JSON as text, and declares an output schema. Fields with no value are
// present as null; times are epoch seconds with millisecond precision
// (1718000000.123). Stored JSON values (value, output, context) are returned
// byte for byte, so integers beyond 2^53 keep every digit.
//
// # Errors
//
// Arguments are checked before the store is called: a missing, mistyped,
// out-of-range or unknown argument is a tool error naming the parameter.
// Failures are tool error results (isError true) whose text reads like
// FastMCP's, "Error calling tool '<name>': <message>", with the Python
// sidecar's message where it had one ("Workflow 'wf-…' not found",
// "n must be >= 1, got 0"). A claim that loses or a lease held by another
// holder is a normal result (claimed or acquired false, with the reason),
// as in Python. A handler never returns a Go error, and a panic inside it is
// recovered into a tool error.
//
// # Tracing
//
// With Options.TracerProvider every tool call is a span of kind server
// named "tools/call <tool>", with the attributes of OpenTelemetry's MCP
// conventions and never an argument or a result; its parent comes from the
// call's params._meta (traceparent, tracestate, baggage) or the span in the
// call's context.
//
// # Schemas
//
// Input and output schemas keep to what every MCP host reads: a single
// "type" per schema ("may be null" is anyOf with a null branch) and no
// untyped schema ("any JSON value" is anyOf the six JSON types).
//
// # Namespaces
//
// A call whose context carries a namespace (WithNamespace, typically set by
// authentication middleware from the bearer token) works in that namespace
// of the store; other calls work in the store's own namespace.
package mcpadapter
