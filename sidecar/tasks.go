package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/mcptasks"
)

// The sidecar's durable tasks (package mcptasks): workflow_wait and
// state_wait may be called as tasks, in both protocol eras, and then wait as
// long as the task lives instead of at most 60 seconds. Tasks live in the
// store's namespace mcptasks.DefaultNamespace, so any replica over the same
// store answers for them and takes over those of a replica that died.

// taskTools are the tools that may run as tasks.
var taskTools = []string{"workflow_wait", "state_wait"}

// A TaskConfig configures the sidecar's tasks.
type TaskConfig struct {
	// Enabled turns tasks on (the default).
	Enabled bool
	// DefaultTTL is the lifetime of a task whose client asks for none (a
	// 2026-07-28 client never does).
	DefaultTTL time.Duration
	// MaxTTL is the longest lifetime of a task: a longer ttl asked for is
	// cut to it.
	MaxTTL time.Duration
	// MaxLive bounds a caller's unfinished tasks (the caller: its bearer
	// token, or the namespace when there are no tokens).
	MaxLive int
	// ClaimTTL is how long after its last heartbeat a task whose replica
	// died is taken over by another replica.
	ClaimTTL time.Duration
}

// DefaultTaskConfig is the tasks' configuration when no setting says
// otherwise.
func DefaultTaskConfig() TaskConfig {
	return TaskConfig{Enabled: true, DefaultTTL: mcptasks.DefaultTTL, MaxTTL: mcptasks.DefaultMaxTTL,
		MaxLive: mcptasks.DefaultMaxLive, ClaimTTL: mcptasks.DefaultClaimTTL}
}

// The task settings follow the others in -h and the README.
func init() {
	settings = append(settings,
		setting{env: "SIDECAR_TASKS", flag: "tasks", isBool: true,
			usage: "durable MCP tasks (protocols 2025-11-25 and 2026-07-28) for workflow_wait and state_wait",
			show:  func(c *Config) string { return strconv.FormatBool(c.Tasks.Enabled) },
			set:   func(c *Config, v string) error { return parseBool(&c.Tasks.Enabled, v) }},
		setting{env: "SIDECAR_TASK_TTL_SECONDS", flag: "task-ttl-seconds",
			usage: "lifetime of a task whose client asks for none (every 2026-07-28 task)",
			show:  func(c *Config) string { return showSeconds(c.Tasks.DefaultTTL) },
			set:   func(c *Config, v string) error { return parseSeconds(&c.Tasks.DefaultTTL, v, false) }},
		setting{env: "SIDECAR_TASK_MAX_TTL_SECONDS", flag: "task-max-ttl-seconds",
			usage: "longest lifetime of a task; a longer ttl asked for is cut to it",
			show:  func(c *Config) string { return showSeconds(c.Tasks.MaxTTL) },
			set:   func(c *Config, v string) error { return parseSeconds(&c.Tasks.MaxTTL, v, false) }},
		setting{env: "SIDECAR_TASK_MAX_LIVE", flag: "task-max-live",
			usage: "most unfinished tasks per caller (bearer token; namespace without tokens); one more is refused",
			show:  func(c *Config) string { return strconv.Itoa(c.Tasks.MaxLive) },
			set:   func(c *Config, v string) error { return parseInt(&c.Tasks.MaxLive, v) }},
		setting{env: "SIDECAR_TASK_CLAIM_TTL_SECONDS", flag: "task-claim-ttl-seconds",
			usage: "a task whose replica died is taken over by another replica this long after its last heartbeat",
			show:  func(c *Config) string { return showSeconds(c.Tasks.ClaimTTL) },
			set:   func(c *Config, v string) error { return parseSeconds(&c.Tasks.ClaimTTL, v, false) }},
	)
}

// taskServerOptions are the MCP server's options for tasks, when on.
func (s *Sidecar) taskServerOptions() []server.ServerOption {
	if !s.cfg.Tasks.Enabled {
		return nil
	}
	return mcptasks.ServerOptions()
}

// startTasks gives the MCP server its tasks, when on.
func (s *Sidecar) startTasks() error {
	c := s.cfg.Tasks
	if !c.Enabled {
		return nil
	}
	for _, t := range s.cfg.Tokens {
		if t.Namespace == mcptasks.DefaultNamespace {
			return fmt.Errorf("%w: SIDECAR_AUTH_TOKENS: namespace %q holds the sidecar's tasks; give the token another one",
				ErrConfig, t.Namespace)
		}
	}
	events := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricTasks,
		Help: "MCP tasks, by event: created, completed, failed, cancelled, taken_over."}, []string{"event"})
	for _, e := range []mcptasks.Event{mcptasks.EventCreated, mcptasks.EventCompleted, mcptasks.EventFailed,
		mcptasks.EventCancelled, mcptasks.EventTakenOver} {
		events.WithLabelValues(string(e))
	}
	tasks, err := mcptasks.New(s.store, s.mcp, &mcptasks.Options{
		DefaultTTL: c.DefaultTTL,
		MaxTTL:     c.MaxTTL,
		MaxLive:    c.MaxLive,
		ClaimTTL:   c.ClaimTTL,
		Owner:      s.taskOwner,
		Context: func(ctx context.Context, o mcptasks.Owner) context.Context {
			if c, ok := taskCaller(o); ok {
				ctx = mcpadapter.WithCaller(ctx, c) // the access and principal of the task's creator
			}
			return mcpadapter.WithNamespace(ctx, o.Namespace)
		},
		Prepare: mcpadapter.PrepareMessage,
		Observe: func(e mcptasks.Event) { events.WithLabelValues(string(e)).Inc() },
		Logger:  s.log.With("component", "mcptasks"),
	})
	if err != nil {
		return fmt.Errorf("%w: tasks: %v", ErrConfig, err)
	}
	if err := tasks.Enable(taskTools...); err != nil {
		_ = tasks.Close(context.Background())
		return err
	}
	s.metrics.reg.MustRegister(events, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricTasksRunning,
		Help: "MCP tasks this replica is running."}, func() float64 { return float64(tasks.Running()) }))
	s.tasks = tasks
	return nil
}

// Metric names of tasks.
const (
	MetricTasks        = "state_sidecar_tasks_total"
	MetricTasksRunning = "state_sidecar_tasks_running"
)

// taskOwner is the owner of a request's tasks: its namespace and its
// authenticated caller (ownerPrincipal: its access and principal, for a
// static token a digest of it: the token itself is never stored).
func (s *Sidecar) taskOwner(ctx context.Context) (mcptasks.Owner, error) {
	ns, ok := mcpadapter.NamespaceFrom(ctx)
	if !ok {
		ns = s.store.NamespaceName()
	}
	o := mcptasks.Owner{Namespace: ns}
	if c, ok := mcpadapter.CallerFrom(ctx); ok {
		o.Principal = ownerPrincipal(c)
	}
	return o, nil
}

// taskFront answers the task requests before next (mcp-go) sees them. The
// body was read, and prepared, by readBody; the task keeps the message as the
// client sent it (mcpadapter.OriginalMessage), for any replica to run.
func (s *Sidecar) taskFront(next http.Handler) http.Handler {
	if s.tasks == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rb, ok := r.Body.(*bodyReader)
		if r.Method != http.MethodPost || !ok {
			next.ServeHTTP(w, r)
			return
		}
		body := make([]byte, rb.Len())
		_, _ = rb.ReadAt(body, 0)
		if s.tasks.Serve(w, r, mcpadapter.OriginalMessage(body)) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// isTask reports whether a tool call runs as a task: it then has the task's
// own deadline and cancellation, not a request's.
func isTask(ctx context.Context) bool {
	_, ok := mcptasks.FromContext(ctx)
	return ok
}

// stopTasks hands this replica's tasks over to the other replicas and ends
// the tasks/result calls waiting here (their clients ask again, of another
// replica): at the start of a shutdown, so that no task waits for it.
func (s *Sidecar) stopTasks() {
	if s.tasks == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.tasks.Close(ctx); err != nil {
		s.log.Warn("tasks still running at shutdown", "err", err)
	}
}
