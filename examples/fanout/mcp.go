package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/examples/internal/mcpconn"
)

// A sidecarClient is an MCP client of the sidecar over Streamable HTTP:
// the only way the orchestrator's processes reach the shared state.
type sidecarClient struct {
	c *client.Client
}

// A toolError is a tool call the sidecar answered with isError.
type toolError struct{ Tool, Msg string }

func (e *toolError) Error() string { return e.Tool + ": " + e.Msg }

// dial connects to the sidecar at base (http://host:port, with or without
// /mcp) as name; token, if any, is sent as a bearer token.
func dial(ctx context.Context, base, token, name string) (*sidecarClient, error) {
	ep := strings.TrimRight(base, "/")
	if !strings.HasSuffix(ep, "/mcp") {
		ep += "/mcp"
	}
	// Long-polls wait up to 60 s; give every request a little more.
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPTimeout(90 * time.Second),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler))}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	c, err := mcpconn.Connect(ctx, ep, name, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to the sidecar at %s: %w", ep, err)
	}
	return &sidecarClient{c: c}, nil
}

// call calls tool with args and decodes its result into out (if not nil).
// A tool error is a *toolError.
func (s *sidecarClient) call(ctx context.Context, tool string, args map[string]any, out any) error {
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	text := mcpconn.Text(res)
	if res.IsError {
		return &toolError{Tool: tool, Msg: text}
	}
	raw := json.RawMessage(text)
	if len(res.RawStructuredContent) > 0 {
		raw = res.RawStructuredContent
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: unexpected result: %w", tool, err)
	}
	return nil
}

// Close ends the connection.
func (s *sidecarClient) Close() error { return s.c.Close() }

// The shapes of the tool results this example reads.
type (
	runInfo struct {
		RunID          string            `json:"run_id"`
		Status         string            `json:"status"`
		Tags           map[string]string `json:"tags"`
		AgentID        *string           `json:"agent_id"`
		LastStep       int64             `json:"last_step"`
		Attempt        int64             `json:"attempt"`
		Fence          *int64            `json:"fence"`
		ClaimExpiresAt *float64          `json:"claim_expires_at"`
		Children       map[string]int64  `json:"children"` // workflow_status only
		Reached        bool              `json:"reached"`  // workflow_wait only
	}
	runsResult struct {
		Runs []runInfo `json:"runs"`
	}
	createResult struct {
		RunID    string `json:"run_id"`
		Replayed bool   `json:"replayed"`
	}
	claimResult struct {
		Claimed bool    `json:"claimed"`
		Reason  *string `json:"reason"`
		Fence   *int64  `json:"fence"`
		Attempt *int64  `json:"attempt"`
	}
	resumeResult struct {
		LastStep    int64                      `json:"last_step"`
		StepOutputs map[string]json.RawMessage `json:"step_outputs"`
	}
	getResult struct {
		Value json.RawMessage `json:"value"`
		Found bool            `json:"found"`
	}
	historyResult struct {
		Entries []historyEntry `json:"entries"`
	}
	historyEntry struct {
		ID        int64   `json:"id"`
		Key       string  `json:"key"`
		Op        string  `json:"op"`
		AgentID   *string `json:"agent_id"`
		WrittenAt float64 `json:"written_at"`
	}
)

// open reports whether a run status is not final.
func open(status string) bool { return status != "done" && status != "failed" }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
