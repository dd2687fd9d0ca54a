// Command server runs the MCP State Sidecar from the examples: the very
// same program as cmd/state-sidecar (package sidecar's Main), kept so that
// "cd examples && go run ./server" works. Install the sidecar under its own name
// with go install github.com/statesidecar/state/cmd/state-sidecar@latest.
//
//	cd examples   # a module of its own
//	go run ./server                       # HTTP on 127.0.0.1:8000, SQLite file state_sidecar.db
//	go run ./server -transport stdio      # for an MCP host that launches it
//	go run ./server -h                    # every setting
package main

import "github.com/statesidecar/state/sidecar"

func main() { sidecar.ProcessMain() }
