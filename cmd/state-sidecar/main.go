// Command state-sidecar is the MCP State Sidecar: the 21 state tools of
// package mcpadapter over Streamable HTTP (at /mcp, stateless by default) or
// stdio, on SQLite, Redis, PostgreSQL, S3, a directory or memory, so that
// agents in any language share durable coordination state.
//
//	go install github.com/statesidecar/state/cmd/state-sidecar@latest
//	state-sidecar                       # HTTP on 127.0.0.1:8000/mcp, SQLite file ./state_sidecar.db
//	state-sidecar -transport stdio      # for an MCP host that launches it
//	state-sidecar -h                    # every setting, its environment variable and default
//	state-sidecar -version
//	state-sidecar import ./state_sidecar.db   # copy a Python sidecar's data into the store
//	state-sidecar copy sqlite:///a.db s3://bucket/prefix   # move a store to another backend
//
// Configuration is by environment, each variable overridden by a flag of
// the same meaning (README.md beside this file has the table). SIGTERM or
// SIGINT stops it gracefully: no new requests, calls in flight finish, the
// store is closed, exit status 0. Logs go to stderr; stdout is reserved for
// the stdio transport. The program is package sidecar's Main.
package main

import "github.com/statesidecar/state/sidecar"

func main() { sidecar.ProcessMain() }
