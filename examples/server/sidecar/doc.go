// Package sidecar is the MCP State Sidecar behind examples/server: the
// 19 state tools of package mcpadapter served over Streamable HTTP or stdio,
// with configuration from the environment and flags, bearer tokens mapped to
// namespaces, Prometheus metrics, health endpoints and a graceful shutdown.
//
// It is a package rather than part of the main program so that tests and the
// load generator (examples/loadgen) can run the very same handler in-process.
//
// # Configuration
//
// Load reads the environment (the Python sidecar's names first) and lets a
// flag of the same meaning override each variable:
//
//	variable                     flag                 default
//	STATE_BACKEND                -backend             sqlite (or redis, memory)
//	DB_PATH                      -db-path             state_sidecar.db
//	REDIS_URL                    -redis-url           redis://localhost:6379
//	SIDECAR_HOST                 -host                127.0.0.1
//	SIDECAR_PORT                 -port                8000
//	SIDECAR_TRANSPORT            -transport           http (or stdio)
//	SIDECAR_STATEFUL             -stateful            false
//	SIDECAR_AUTH_TOKENS          -auth-tokens         none: "token" or "token:namespace", comma-separated
//	SIDECAR_ALLOW_INSECURE       -allow-insecure      false
//	SIDECAR_ALLOW_RESET          -allow-reset         false
//	SIDECAR_CLAIM_TTL_SECONDS    -claim-ttl-seconds   600
//	SIDECAR_SHUTDOWN_TIMEOUT_SECONDS -shutdown-timeout-seconds 25
//	SIDECAR_LOG_LEVEL            -log-level           info (or debug, warn, error)
//	SIDECAR_LOG_FORMAT           -log-format          text (or json)
//
// # HTTP
//
// The handler serves /mcp (Streamable HTTP, stateless unless Stateful),
// /healthz (the process is alive), /readyz (the backend answers) and
// /metrics (Prometheus text format). With tokens configured, every request to
// /mcp needs "Authorization: Bearer <token>" and works in that token's
// namespace; the other endpoints are open.
//
// mcp-go's DNS-rebinding guard (403 for a request that arrives on a loopback
// address with a Host header that is not localhost) stays on while no tokens
// are configured: then it is what stops a web page in a local browser from
// driving the sidecar. With tokens it is off, because a browser cannot attach
// the token on its own, and a proxy in the same pod that keeps the original
// Host header must work.
//
// # Logs and stdout
//
// Logs go to the logger given to Run (stderr in examples/server). Nothing but
// JSON-RPC is ever written to stdout, which is the stdio transport's channel.
package sidecar
