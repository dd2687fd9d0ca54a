// Package sidecar is the MCP State Sidecar, the program behind
// cmd/state-sidecar and examples/server: the 21 state tools of package
// mcpadapter served over Streamable HTTP or stdio, with configuration from
// the environment and flags, bearer tokens mapped to namespaces, Prometheus
// metrics, health endpoints, limits against abusive clients and a graceful
// shutdown.
//
// Platform teams may embed it: New builds a Sidecar from a Config, whose
// Handler is an ordinary http.Handler to mount or wrap (tracing, access
// logs) and whose MCPServer serves in-process clients. Main is the whole
// command line, and a Command adds a subcommand to it; ImportCommand is the
// one cmd/state-sidecar adds, which copies a Python sidecar's data into the
// store (package pyimport). Serving a SQLite file that holds only a Python
// sidecar's tables is refused with a message naming it.
//
// # Command line
//
//	state-sidecar [serve] [flags]    serve until SIGTERM or SIGINT (Run)
//	state-sidecar version            also -version
//	state-sidecar healthcheck        exit 0 if the local sidecar's /readyz answers 200
//	state-sidecar import SOURCE      copy a Python sidecar's data into the store (ImportCommand)
//	state-sidecar help [command]     also -h
//	state-sidecar <command> ...      a Command given to Main
//
// # Configuration
//
// Load reads the environment (the Python sidecar's names first: STATE_BACKEND,
// DB_PATH, REDIS_URL, SIDECAR_HOST, SIDECAR_PORT) and lets a flag of the same
// meaning override each variable. A variable set to "" counts as unset, and
// a bad value of a setting the configuration does not use is a logged
// warning, not an error. -h lists every setting with its variable and
// default; cmd/state-sidecar/README.md has the same table. Besides the
// backend, the bind address, tokens and logging, the settings cover history
// retention and sweeping, input limits, the claim TTL, the SQLite lock wait,
// and the HTTP limits below.
//
// # HTTP
//
// The handler serves /mcp (Streamable HTTP, stateless unless Stateful),
// /healthz (the process is alive), /readyz (the store answers Store.Ping,
// within five seconds) and /metrics (Prometheus text format). With tokens
// configured, every request to /mcp needs "Authorization: Bearer <token>"
// and works in that token's namespace; the other endpoints are open.
//
// Against abusive clients: a request's headers and then its body must each
// arrive within ReadTimeout; a request without a valid token is answered
// 401 from its headers alone, before its body is read; bodies are capped at
// MaxRequestBytes; at most MaxConnections connections are open and at most
// MaxConcurrentRequests requests are served at once; every tool call has a
// deadline (RequestTimeout), on stdio too; a stateful server keeps at most
// MaxSessions sessions and ends those idle for SessionIdleTimeout. Tool
// errors caused by the backend show the client a stable message and an
// error id; the details are logged with that id.
//
// mcp-go's DNS-rebinding guard (403 for a request that arrives on a loopback
// address with a Host header that is not localhost) stays on while no tokens
// are configured: then it is what stops a web page in a local browser from
// driving the sidecar. With tokens it is off, because a browser cannot attach
// the token on its own, and a proxy in the same pod that keeps the original
// Host header must work.
//
// # Tracing
//
// With Config.TracerProvider every tool call is an OpenTelemetry span whose
// parent is the trace context of the call's params._meta or of the HTTP
// request's traceparent header, and every backend call a span beneath it.
// Run sets the provider from the standard OTEL_* variables (an OTLP
// exporter over HTTP or gRPC) only when they ask for traces; without a
// provider nothing is traced and nothing is spent on it.
//
// # Logs and stdout
//
// Logs go to the logger given to New (stderr in the command). Nothing but
// JSON-RPC is ever written to stdout, which is the stdio transport's channel.
package sidecar
