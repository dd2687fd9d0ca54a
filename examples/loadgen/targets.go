package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/examples/internal/loopback"
	"github.com/statesidecar/state/examples/internal/rediskeys"
	"github.com/statesidecar/state/sidecar"
)

// The workload: each worker alternates a write and a read of its own keys,
// a small JSON object each time, so that workers do not contend on a key
// (-workload mixed); or only writes (set), the n-th call then being made
// as the mixed workload's 2n-th.
func key(w, n int) string        { return fmt.Sprintf("loadgen/w%d/k%d", w, (n/2)%64) }
func value(n int) map[string]any { return map[string]any{"n": n, "note": "loadgen"} }

// Workloads: -workload's values. With claim, each worker creates a run
// (its first call, in the warm-up) and then claims it again and again as
// its one agent: workflow_claim's heartbeat, a durable write of the run
// and its history entry.
const (
	workloadMixed = "mixed"
	workloadSet   = "set"
	workloadClaim = "claim"
)

// runs holds each worker's run for the claim workload, by worker.
type runs struct{ m sync.Map }

func (r *runs) get(w int) (string, bool) {
	v, ok := r.m.Load(w)
	if !ok {
		return "", false
	}
	return v.(string), true
}

func agentOf(w int) string { return fmt.Sprintf("loadgen-w%d", w) }

// shape maps call n of a workload to the mixed workload's call, whose
// parity says set (even) or get (odd).
func shape(workload string, n int) int {
	if workload == workloadSet {
		return 2 * n
	}
	return n
}

// storeCaller calls the Store in-process: the baseline.
func storeCaller(st *state.Store, workload string) caller {
	var rs runs
	return func(ctx context.Context, w, n int) error {
		if workload == workloadClaim {
			id, ok := rs.get(w)
			if !ok {
				r, err := st.CreateRun(ctx, "loadgen", nil)
				if err == nil {
					rs.m.Store(w, r.ID)
				}
				return err
			}
			_, err := st.ClaimRun(ctx, id, agentOf(w))
			return err
		}
		n = shape(workload, n)
		if n%2 == 0 {
			_, err := st.Set(ctx, key(w, n), value(n))
			return err
		}
		_, err := st.Get(ctx, key(w, n))
		return err
	}
}

// mcpCaller makes the same calls as tools over MCP, worker w on clients[w].
func mcpCaller(clients []*client.Client, workload string) caller {
	var rs runs
	return func(ctx context.Context, w, n int) error {
		var req mcp.CallToolRequest
		if workload == workloadClaim {
			id, ok := rs.get(w)
			if ok {
				req.Params.Name, req.Params.Arguments = "workflow_claim", map[string]any{"run_id": id, "agent_id": agentOf(w)}
			} else {
				req.Params.Name, req.Params.Arguments = "workflow_create", map[string]any{"name": "loadgen"}
			}
			res, err := clients[w].CallTool(ctx, req)
			if err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("%s: tool error: %v", req.Params.Name, res.Content)
			}
			if !ok {
				m, _ := res.StructuredContent.(map[string]any)
				id, _ := m["run_id"].(string)
				if id == "" {
					return fmt.Errorf("workflow_create: no run_id in %v", res.StructuredContent)
				}
				rs.m.Store(w, id)
			}
			return nil
		}
		n = shape(workload, n)
		if n%2 == 0 {
			req.Params.Name, req.Params.Arguments = "state_set", map[string]any{"key": key(w, n), "value": value(n)}
		} else {
			req.Params.Name, req.Params.Arguments = "state_get", map[string]any{"key": key(w, n)}
		}
		res, err := clients[w].CallTool(ctx, req)
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("%s: tool error: %v", req.Params.Name, res.Content)
		}
		return nil
	}
}

// connect opens n MCP clients over Streamable HTTP to mcpURL, sharing one
// pool of keep-alive connections large enough for all of them.
func connect(ctx context.Context, mcpURL, token string, n int) ([]*client.Client, func(), error) {
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * n, MaxIdleConnsPerHost: 2 * n}}
	opts := []transport.StreamableHTTPCOption{
		transport.WithHTTPBasicClient(hc),
		transport.WithHTTPLogger(slog.New(slog.DiscardHandler)),
	}
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	var clients []*client.Client
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
		hc.CloseIdleConnections()
	}
	for range n {
		c, err := client.NewStreamableHttpClient(mcpURL, opts...)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		clients = append(clients, c)
		if err := c.Start(ctx); err != nil {
			closeAll()
			return nil, nil, err
		}
		if _, err := c.Initialize(ctx, mcp.InitializeRequest{}); err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("initialize %s: %w", mcpURL, err)
		}
	}
	return clients, closeAll, nil
}

// inProcess is a sidecar (or the echo server, sc nil) serving HTTP on a
// loopback port in this process.
type inProcess struct {
	sc               *sidecar.Sidecar
	closeFn          func() error
	url              string
	dir              string
	redisURL, prefix string
	pgURL, schema    string
}

// startSidecar starts the real sidecar handler (package sidecar)
// on backend, on a loopback listener. A SQLite file goes to a temporary
// directory that close removes; Redis keys go under a prefix of their own
// (redisstate's prefix parameter), which close deletes; PostgreSQL tables
// go to a schema of their own (pgstate's schema parameter), which close
// drops.
func startSidecar(ctx context.Context, backend string, o options) (*inProcess, error) {
	cfg := sidecar.Defaults()
	cfg.Backend, cfg.Port = backend, 0
	p := &inProcess{}
	if backend == sidecar.BackendRedis {
		u, err := url.Parse(o.redisURL)
		if err != nil {
			return nil, fmt.Errorf("-redis-url: %w", err)
		}
		p.redisURL, p.prefix = o.redisURL, fmt.Sprintf("loadgen-%d:", time.Now().UnixNano())
		q := u.Query()
		q.Set("prefix", p.prefix)
		u.RawQuery = q.Encode()
		cfg.RedisURL = u.String()
	}
	if backend == sidecar.BackendPostgres {
		u, err := url.Parse(o.postgresURL)
		if err != nil {
			return nil, fmt.Errorf("-postgres-url: %w", err)
		}
		p.pgURL, p.schema = o.postgresURL, fmt.Sprintf("loadgen_%d", time.Now().UnixNano())
		q := u.Query()
		q.Set("schema", p.schema)
		u.RawQuery = q.Encode()
		cfg.DatabaseURL = u.String()
	}
	if backend == sidecar.BackendSQLite {
		dir, err := os.MkdirTemp("", "loadgen-")
		if err != nil {
			return nil, err
		}
		p.dir, cfg.DBPath = dir, filepath.Join(dir, "loadgen.db")
	}
	own, err := loopback.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		p.removeDir()
		return nil, err
	}
	p.sc, p.url = own.Sidecar, own.URL+"/mcp"
	p.closeFn = func() error {
		err := own.Stop()
		p.removeDir()
		return errors.Join(err, p.deleteRedisKeys(), p.dropSchema())
	}
	return p, nil
}

func (p *inProcess) close() error { return p.closeFn() }

// deleteRedisKeys deletes the keys of the run's Redis prefix.
func (p *inProcess) deleteRedisKeys() error {
	if p.prefix == "" {
		return nil
	}
	if err := rediskeys.Delete(context.Background(), p.redisURL, p.prefix); err != nil {
		return fmt.Errorf("cleaning Redis up: %w", err)
	}
	return nil
}

// dropSchema drops the run's PostgreSQL schema, which it created.
func (p *inProcess) dropSchema() error {
	if p.schema == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.pgURL)
	if err != nil {
		return fmt.Errorf("cleaning PostgreSQL up: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{p.schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("cleaning PostgreSQL up: %w", err)
	}
	return nil
}

func (p *inProcess) removeDir() {
	if p.dir != "" && strings.Contains(p.dir, "loadgen-") {
		_ = os.RemoveAll(p.dir)
	}
}
