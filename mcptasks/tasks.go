package mcptasks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/statesidecar/state"
)

// ExtensionID names the 2026-07-28 tasks extension.
const ExtensionID = "io.modelcontextprotocol/tasks"

// Defaults of Options.
const (
	DefaultNamespace     = "mcp-tasks"
	DefaultTTL           = time.Hour
	DefaultMaxTTL        = 24 * time.Hour
	DefaultMaxLive       = 100
	DefaultPollInterval  = time.Second
	DefaultClaimTTL      = 15 * time.Second
	DefaultSweepInterval = 2 * time.Second
)

// An Event is something that happened to a task, for metrics
// (Options.Observe).
type Event string

// The events Options.Observe is told about.
const (
	// EventCreated: a tools/call became a task.
	EventCreated Event = "created"
	// EventCompleted: a task's call returned a result (isError true
	// included).
	EventCompleted Event = "completed"
	// EventFailed: a task's call ended in a JSON-RPC error.
	EventFailed Event = "failed"
	// EventCancelled: a client cancelled a task.
	EventCancelled Event = "cancelled"
	// EventTakenOver: a worker claimed a task whose previous worker's claim
	// had expired (the process died, or stalled), to run it again.
	EventTakenOver Event = "taken_over"
)

// Options configure Tasks. A nil *Options means all defaults.
type Options struct {
	// Namespace is the store namespace that holds every task (records,
	// runs, checkpoints), whoever owns it. Keep it apart from the
	// namespaces clients work in. Defaults to "mcp-tasks".
	Namespace string
	// DefaultTTL is the lifetime of a task whose request asks for none (a
	// 2026-07-28 request never does). Defaults to 1 hour.
	DefaultTTL time.Duration
	// MaxTTL bounds a task's lifetime: a longer ttl asked for is cut to it
	// (the 2025-11-25 text lets a server override the ttl; the task reports
	// the one it got). Defaults to 24 hours.
	MaxTTL time.Duration
	// MaxLive bounds an owner's unfinished tasks (working or
	// input_required); one more is refused with a JSON-RPC error that says
	// so. Defaults to 100.
	MaxLive int
	// PollInterval is the pollInterval / pollIntervalMs suggested to
	// clients. Defaults to 1 second.
	PollInterval time.Duration
	// ClaimTTL is how long a worker's claim on a task lives without a
	// heartbeat; heartbeats come every third of it. When a worker's process
	// dies its tasks are taken over at most ClaimTTL plus SweepInterval
	// later. Defaults to 15 seconds.
	ClaimTTL time.Duration
	// SweepInterval is how often this process looks for tasks whose
	// worker's claim expired, to take them over. Defaults to 2 seconds; a
	// negative value disables takeover by this process (it still runs the
	// tasks it accepts).
	SweepInterval time.Duration
	// HistoryMaxAge is how long the task namespace keeps its history. A
	// task's writes are private (state.Write.Private): their events record
	// the task's id, the time, the worker and a size, never the params, the
	// result or a checkpoint. The sweep that takes tasks over also removes,
	// at most once a minute, the events older than this
	// (state.Store.TrimHistory). Defaults to MaxTTL, so that not even those
	// outlive the longest task; set it to the shortest TTL given to tasks
	// to have them outlive no task. A negative value leaves the history to
	// the store's own retention. Only a process that sweeps (SweepInterval
	// not negative) trims: one replica is enough.
	HistoryMaxAge time.Duration
	// Worker names this process in claims and history. Defaults to the host
	// name, the process id and random characters.
	Worker string
	// Owner returns the owner of a request from its context: the
	// namespace and principal its authentication gave it. An error refuses
	// the request. Defaults to one owner for everyone (Owner{}): only for a
	// server whose every client may see every task.
	Owner func(ctx context.Context) (Owner, error)
	// Context, if set, prepares the context a task's call runs with, from
	// the owner's (on the accepting replica, the request's context without
	// its cancellation; on another replica, a fresh one): the sidecar puts
	// the owner's namespace in it. The call's own deadline and cancellation
	// come from the task.
	Context func(ctx context.Context, owner Owner) context.Context
	// Decide, if set, says whether a 2026-07-28 call of an enabled tool,
	// from a client that declared the extension, becomes a task; the server
	// is the sole decider in that era. Defaults to always. (A 2025-11-25
	// client asks for a task itself, with params.task.)
	Decide func(ctx context.Context, tool string, arguments json.RawMessage) bool
	// Prepare, if set, is applied to the tools/call message a task runs
	// before the server sees it, as the transport applies it to every
	// message it receives (the sidecar: mcpadapter.PrepareMessage).
	Prepare func(msg []byte) []byte
	// Observe, if set, is told about every Event; it must be fast and safe
	// for concurrent use.
	Observe func(Event)
	// Logger receives what clients are not told (failed writes, lost
	// claims). Defaults to discarding.
	Logger *slog.Logger
	// Clock, if set, decides "now" for task times (tests set the store's
	// fake clock here too).
	Clock state.Clock
}

// Tasks gives an mcp-go server durable tasks over a state.Store: create it
// with New, mark tools with Enable, put Handler in front of the HTTP
// transport (or Stdio around the stdio transport), and Close it before the
// store.
type Tasks struct {
	st     *state.Store // the task namespace
	srv    *server.MCPServer
	o      Options
	worker string
	log    *slog.Logger

	mu      sync.Mutex
	tools   map[string]bool
	running map[string]*execution // by task id
	closed  bool

	ctx  context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	trimmed time.Time // when the sweep last trimmed history (by now)
}

// ServerOptions are the options an mcp-go server needs to advertise tasks
// in both eras: the 2026-07-28 extension (server/discover) and the
// 2025-11-25 capabilities (tasks.list, tasks.cancel,
// tasks.requests.tools.call). Pass them to server.NewMCPServer.
func ServerOptions() []server.ServerOption {
	return []server.ServerOption{
		server.WithExtensions(map[string]any{ExtensionID: map[string]any{}}),
		server.WithTaskCapabilities(true, true, true),
	}
}

// New returns Tasks for srv over st, whose namespace Options.Namespace holds
// the tasks, and starts looking for tasks to take over (Options.SweepInterval).
// srv must have been built with ServerOptions.
func New(st *state.Store, srv *server.MCPServer, opts *Options) (*Tasks, error) {
	if st == nil || srv == nil {
		return nil, errors.New("mcptasks: New needs a store and a server")
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	ts, err := st.Namespace(o.Namespace)
	if err != nil {
		return nil, fmt.Errorf("mcptasks: Options.Namespace: %w", err)
	}
	t := &Tasks{st: ts, srv: srv, o: o, worker: o.Worker, log: o.Logger,
		tools: map[string]bool{}, running: map[string]*execution{}}
	t.ctx, t.stop = context.WithCancel(context.Background())
	if o.SweepInterval > 0 {
		t.wg.Add(1)
		go t.sweep()
	}
	return t, nil
}

// fill sets defaults and checks the options.
func (o *Options) fill() error {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	def(&o.DefaultTTL, DefaultTTL)
	def(&o.MaxTTL, DefaultMaxTTL)
	def(&o.PollInterval, DefaultPollInterval)
	def(&o.ClaimTTL, DefaultClaimTTL)
	def(&o.SweepInterval, DefaultSweepInterval)
	def(&o.HistoryMaxAge, o.MaxTTL)
	if o.MaxLive == 0 {
		o.MaxLive = DefaultMaxLive
	}
	switch {
	case o.DefaultTTL < time.Millisecond:
		return errors.New("mcptasks: Options.DefaultTTL must be at least 1ms")
	case o.MaxTTL < o.DefaultTTL:
		return fmt.Errorf("mcptasks: Options.MaxTTL (%v) is below DefaultTTL (%v)", o.MaxTTL, o.DefaultTTL)
	case o.MaxLive < 0:
		return errors.New("mcptasks: Options.MaxLive must not be negative")
	case o.PollInterval < time.Millisecond:
		return errors.New("mcptasks: Options.PollInterval must be at least 1ms")
	case o.ClaimTTL < 30*time.Millisecond:
		return errors.New("mcptasks: Options.ClaimTTL must be at least 30ms")
	}
	if o.Worker == "" {
		host, _ := os.Hostname()
		o.Worker = fmt.Sprintf("mcptasks/%s/%d/%s", host, os.Getpid(), rand.Text()[:8])
	}
	if o.Owner == nil {
		o.Owner = func(context.Context) (Owner, error) { return Owner{}, nil }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Enable makes the named tools of the server task tools: each declares
// execution.taskSupport "optional" (so tools/list says so), a 2025-11-25
// call with params.task and a 2026-07-28 call from a client that declared
// the extension become tasks, and any other call runs as before. It fails,
// changing nothing, when a name is not a tool of the server.
func (t *Tasks) Enable(names ...string) error {
	var tools []server.ServerTool
	for _, n := range names {
		st := t.srv.GetTool(n)
		if st == nil {
			return fmt.Errorf("mcptasks: Enable: the server has no tool %q", n)
		}
		c := *st
		c.Tool.Execution = &mcp.ToolExecution{TaskSupport: mcp.TaskSupportOptional}
		tools = append(tools, c)
	}
	t.srv.AddTools(tools...)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, n := range names {
		t.tools[n] = true
	}
	return nil
}

// enabled reports whether tool is a task tool.
func (t *Tasks) enabled(tool string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tools[tool]
}

// Running returns the number of tasks this process is executing now.
func (t *Tasks) Running() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.running)
}

// Close stops taking over tasks and stops the tasks this process runs:
// their calls' contexts are cancelled, nothing they return is recorded, and
// their claims are given back so that another process runs them at its next
// sweep (at-least-once execution). A tasks/result waiting here answers with
// an error asking the client to ask again (of another replica). Close waits
// for the calls to return, up to ctx's end. Close the store after.
func (t *Tasks) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.stop()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mcptasks: tasks still running at close: %w", ctx.Err())
	}
}

// observe reports e.
func (t *Tasks) observe(e Event) {
	if t.o.Observe != nil {
		t.o.Observe(e)
	}
}

// ttlFor is the lifetime of a task asked to live requested (0: no wish).
func (t *Tasks) ttlFor(requested time.Duration) time.Duration {
	if requested <= 0 {
		return t.o.DefaultTTL
	}
	return min(requested, t.o.MaxTTL)
}
