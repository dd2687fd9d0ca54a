package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/statesidecar/state/internal/storetest"
)

// TestInteropTasks runs interop/ts/tasks.test.mjs: the official clients
// (the TypeScript SDK v1's client.experimental.tasks for 2025-11-25, and
// @modelcontextprotocol/ext-tasks 0.2.2 over @modelcontextprotocol/client
// for both eras) drive durable tasks on two sidecar processes behind a
// round-robin balancer, over SQLite, Redis and PostgreSQL (the last two when
// STATE_TEST_REDIS_URL and STATE_TEST_POSTGRES_URL are set). The test kills
// the replica running a task with SIGKILL when the client asks (the control
// endpoint), so that the other takes the task over.
func TestInteropTasks(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the tasks interop test needs node >= 20 and `npm ci --prefix interop/ts`")
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "interop", "ts"))
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range []string{"sdk", "ext-tasks", "client"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg)); err != nil {
			t.Skip("interop/ts/node_modules is incomplete: run `npm ci --prefix interop/ts`")
		}
	}
	for _, name := range []string{"sqlite", "redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			b := storetest.New(t, name)
			if b.Skip != "" {
				t.Skip(b.Skip)
			}
			env := []string{"SIDECAR_AUTH_TOKENS=tok-a:team,tok-b:team,tok-x:other",
				"SIDECAR_TASK_CLAIM_TTL_SECONDS=2", "SIDECAR_TASK_TTL_SECONDS=300"}
			switch name {
			case "sqlite":
				env = append(env, "DB_PATH="+filepath.Join(t.TempDir(), "tasks.db"))
			case "redis":
				env = append(env, "STATE_BACKEND=redis", "REDIS_URL="+b.URL)
			case "postgres":
				env = append(env, "STATE_BACKEND=postgres", "DATABASE_URL="+b.URL)
			}
			h := newTaskCluster(t, env)

			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "--test", "tasks.test.mjs")
			cmd.Dir = dir
			cmd.Env = cleanEnv("BALANCER_URL="+h.balancerURL, "CONTROL_URL="+h.controlURL,
				"TOKEN=tok-a", "SAME_NS_TOKEN=tok-b", "FOREIGN_TOKEN=tok-x", "BACKEND="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node --test: %v\n%s", err, out)
			}
			if testing.Verbose() {
				t.Logf("node --test:\n%s", out)
			}
			if h.hits[0] == 0 || h.hits[1] == 0 {
				t.Errorf("the balancer sent %d and %d requests to the replicas: both must serve", h.hits[0], h.hits[1])
			}
		})
	}
}

// A taskCluster is two sidecar processes over one store, a round-robin
// balancer before them and a control endpoint that kills and restarts
// them.
type taskCluster struct {
	t   *testing.T
	env []string

	mu       sync.Mutex
	procs    [2]*proc
	bases    [2]string
	next     int
	hits     [2]int
	tr       *http.Transport
	balancer *http.Server

	balancerURL, controlURL string
}

func newTaskCluster(t *testing.T, env []string) *taskCluster {
	h := &taskCluster{t: t, env: env, tr: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(h.tr.CloseIdleConnections)
	for i := range h.procs {
		h.procs[i], h.bases[i] = startHTTP(t, env...)
	}
	h.balancerURL = h.serve(http.HandlerFunc(h.forward))
	ctl := http.NewServeMux()
	ctl.HandleFunc("GET /replicas", h.replicas)
	ctl.HandleFunc("POST /kill/{i}", h.kill)
	ctl.HandleFunc("POST /start/{i}", h.start)
	h.controlURL = h.serve(ctl)
	return h
}

// serve serves handler on a loopback port until the test ends.
func (h *taskCluster) serve(handler http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	h.t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// forward sends a request to the replicas in turn; a replica that does not
// answer (killed) is skipped, as a balancer's health checks would.
func (h *taskCluster) forward(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	first := h.next
	h.next++
	h.mu.Unlock()
	var lastErr error
	for k := range 2 {
		i := (first + k) % 2
		h.mu.Lock()
		base := h.bases[i]
		h.mu.Unlock()
		u, _ := url.Parse(base)
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = u.Scheme, u.Host, u.Host, ""
		out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		res, err := h.tr.RoundTrip(out)
		if err != nil {
			lastErr = err
			continue
		}
		h.mu.Lock()
		h.hits[i]++
		h.mu.Unlock()
		defer res.Body.Close()
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		flush := http.NewResponseController(w)
		buf := make([]byte, 32<<10)
		for {
			n, rerr := res.Body.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				_ = flush.Flush()
			}
			if rerr != nil {
				return
			}
		}
	}
	http.Error(w, "no replica answered: "+lastErr.Error(), http.StatusBadGateway)
}

// replicas answers the replicas' base URLs (a killed one's as it was).
func (h *taskCluster) replicas(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	_ = json.NewEncoder(w).Encode(h.bases)
}

func (h *taskCluster) index(w http.ResponseWriter, r *http.Request) (int, bool) {
	i, err := strconv.Atoi(r.PathValue("i"))
	if err != nil || i < 0 || i > 1 {
		http.Error(w, "replica 0 or 1", http.StatusBadRequest)
		return 0, false
	}
	return i, true
}

// kill ends replica i with SIGKILL: no graceful shutdown, no claim given
// back.
func (h *taskCluster) kill(w http.ResponseWriter, r *http.Request) {
	i, ok := h.index(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	p := h.procs[i]
	h.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	<-p.done
	w.WriteHeader(http.StatusNoContent)
}

// start starts replica i again (after a kill) and answers its base URL.
func (h *taskCluster) start(w http.ResponseWriter, r *http.Request) {
	i, ok := h.index(w, r)
	if !ok {
		return
	}
	p, base := startHTTP(h.t, h.env...)
	h.mu.Lock()
	h.procs[i], h.bases[i] = p, base
	h.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{"url": base})
}
