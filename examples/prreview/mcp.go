package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state/examples/internal/mcpconn"
)

// A mcpClient is an MCP client of the sidecar over Streamable HTTP: the only
// way the dashboard and the Go agents reach it. It connects lazily and again
// after a failure, so a sidecar that starts late or restarts is picked up.
type mcpClient struct {
	endpoint, token, name string

	mu sync.Mutex
	c  *client.Client
}

// A toolError is a tool call the sidecar answered with isError: the
// message is the sidecar's, meant for the caller.
type toolError struct {
	Tool, Msg string
}

func (e *toolError) Error() string { return e.Msg }

// errUnreachable wraps every failure to reach the sidecar.
var errUnreachable = errors.New("the sidecar does not answer")

// errTokenRefused is a sidecar that answers 401: no token, or a wrong one.
var errTokenRefused = errors.New("the sidecar refused the bearer token (401)")

// endpointOf turns a sidecar URL (http://host:port, with or without /mcp)
// into its MCP endpoint.
func endpointOf(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("sidecar URL %q: want http://HOST:PORT or http://HOST:PORT/mcp", raw)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// newMCPClient returns a client of the sidecar at rawURL; name is the
// client name it introduces itself with.
func newMCPClient(rawURL, token, name string) (*mcpClient, error) {
	ep, err := endpointOf(rawURL)
	if err != nil {
		return nil, err
	}
	return &mcpClient{endpoint: ep, token: token, name: name}, nil
}

// conn returns the connected client, connecting first if needed.
func (m *mcpClient) conn(ctx context.Context) (*client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c != nil {
		return m.c, nil
	}
	opts := []transport.StreamableHTTPCOption{transport.WithHTTPTimeout(90 * time.Second)}
	if m.token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + m.token}))
	}
	c, err := mcpconn.Connect(ctx, m.endpoint, m.name, opts...)
	if err != nil {
		return nil, unreachable(err)
	}
	m.c = c
	return c, nil
}

// unreachable words a transport failure for a person, without the
// underlying library's request dump.
func unreachable(err error) error {
	s := err.Error()
	switch {
	case errors.Is(err, transport.ErrUnauthorized) || errors.Is(err, transport.ErrAuthorizationRequired) ||
		strings.Contains(s, "401") || strings.Contains(strings.ToLower(s), "authorization required"):
		return errTokenRefused
	case strings.Contains(s, "connection refused"):
		return fmt.Errorf("%w: connection refused (is it running?)", errUnreachable)
	case strings.Contains(s, "no such host"):
		return fmt.Errorf("%w: unknown host", errUnreachable)
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(s, "Timeout") || strings.Contains(s, "timeout"):
		return fmt.Errorf("%w: timed out", errUnreachable)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w: %v", errUnreachable, err)
}

// call calls a tool and returns its result as JSON. A tool error is a
// *toolError; a transport failure wraps errUnreachable and drops the
// connection so the next call reconnects.
func (m *mcpClient) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	c, err := m.conn(ctx)
	if err != nil {
		return nil, err
	}
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		m.mu.Lock()
		if m.c == c {
			_ = c.Close()
			m.c = nil
		}
		m.mu.Unlock()
		return nil, unreachable(err)
	}
	text := mcpconn.Text(res)
	if res.IsError {
		return nil, &toolError{Tool: tool, Msg: text}
	}
	if len(res.RawStructuredContent) > 0 {
		return res.RawStructuredContent, nil
	}
	if !json.Valid([]byte(text)) {
		return nil, fmt.Errorf("%s answered with something that is not JSON: %.80q", tool, text)
	}
	return json.RawMessage(text), nil
}

// callInto calls a tool and decodes its result into out.
func (m *mcpClient) callInto(ctx context.Context, tool string, args map[string]any, out any) error {
	raw, err := m.call(ctx, tool, args)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: unexpected result: %w", tool, err)
	}
	return nil
}

// Close closes the connection, if any.
func (m *mcpClient) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil {
		return nil
	}
	err := m.c.Close()
	m.c = nil
	return err
}

// The shapes of the tool results the demo reads.
type (
	runInfo struct {
		RunID          string            `json:"run_id"`
		Name           string            `json:"name"`
		Status         string            `json:"status"`
		Tags           map[string]string `json:"tags"`
		AgentID        *string           `json:"agent_id"`
		LastStep       int64             `json:"last_step"`
		CreatedAt      float64           `json:"created_at"`
		UpdatedAt      float64           `json:"updated_at"`
		Attempt        int64             `json:"attempt"`
		Fence          *int64            `json:"fence"`
		ClaimExpiresAt *float64          `json:"claim_expires_at"`
	}
	runsResult struct {
		Runs []runInfo `json:"runs"`
	}
	claimResult struct {
		Claimed   bool     `json:"claimed"`
		RunID     string   `json:"run_id"`
		Reason    *string  `json:"reason"`
		Fence     *int64   `json:"fence"`
		Attempt   *int64   `json:"attempt"`
		ExpiresAt *float64 `json:"expires_at"`
	}
	resumeResult struct {
		RunID       string                     `json:"run_id"`
		LastStep    int64                      `json:"last_step"`
		StepOutputs map[string]json.RawMessage `json:"step_outputs"`
		Meta        runInfo                    `json:"meta"`
	}
	getResult struct {
		Key       string          `json:"key"`
		Value     json.RawMessage `json:"value"`
		Found     bool            `json:"found"`
		Version   *int64          `json:"version"`
		AgentID   *string         `json:"agent_id"`
		UpdatedAt *float64        `json:"updated_at"`
		ExpiresAt *float64        `json:"expires_at"`
	}
	leaseResult struct {
		Acquired  bool     `json:"acquired"`
		Holder    *string  `json:"holder"`
		ExpiresAt *float64 `json:"expires_at"`
		Reason    *string  `json:"reason"`
		Fence     *int64   `json:"fence"`
	}
	healthResult struct {
		Status    string `json:"status"`
		Backend   string `json:"backend"`
		Version   string `json:"version"`
		Namespace string `json:"namespace"`
	}
)

// finished reports whether a run status is final.
func finished(status string) bool { return status == "done" || status == "failed" }

// epoch converts a time to the tools' epoch seconds.
func epoch(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

// fromEpoch converts the tools' epoch seconds to a time.
func fromEpoch(s float64) time.Time { return time.UnixMilli(int64(s * 1000)) }

// A caller calls sidecar tools: the plain client, or an agent's client that
// logs each call.
type caller interface {
	callInto(ctx context.Context, tool string, args map[string]any, out any) error
}
