package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/statesidecar/state/examples/internal/procs"
)

// A worker is one agent process the dashboard started, as the board shows
// it. Everything but the process handle comes from the agent's own stdout
// lines (and from the sidecar, which the watcher reads).
type worker struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"`
	Lang    string `json:"lang"`
	PID     int    `json:"pid"`
	State   string `json:"state"`
	Detail  string `json:"detail,omitempty"`
	RunID   string `json:"run_id,omitempty"`
	Attempt int64  `json:"attempt,omitempty"`
	Fence   int64  `json:"fence,omitempty"`
	Step    int64  `json:"step,omitempty"`
	Total   int64  `json:"total,omitempty"`
	Race    string `json:"race,omitempty"`
	Alive   bool   `json:"alive"`
	Killed  bool   `json:"killed,omitempty"`
	// Frozen is set while the process is stopped (Freeze: SIGSTOP), Thawed
	// once it was continued (SIGCONT): a zombie, if its claim was taken
	// over meanwhile.
	Frozen bool `json:"frozen,omitempty"`
	Thawed bool `json:"thawed,omitempty"`
	// ResumedFrom is the checkpoint a takeover resumed after (0: none).
	ResumedFrom int64     `json:"resumed_from,omitempty"`
	Exit        *int      `json:"exit,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at,omitzero"`

	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	ready bool
}

// A race is a Spawn 3: agents that discover together and are released
// together behind a barrier, so their claims really overlap.
type race struct {
	ID       string    `json:"id"`
	Kind     string    `json:"kind"`
	Members  []string  `json:"members"`
	Released bool      `json:"released"`
	Started  time.Time `json:"started"`
}

// An agentCommand says how to start one agent process.
type agentCommand struct {
	Path string
	Args []string
	Env  []string
}

// A supervisor starts agent processes, reads their reports, crashes them
// on demand and stops them all on exit.
type supervisor struct {
	hub      *hub
	changed  func()
	mu       sync.Mutex
	workers  []*worker
	races    []*race
	stopping bool
	// fencedOut, if set, is called (in a goroutine of its own) when an
	// agent exits fenced out: its claim lapsed and its run may be left
	// with nobody working on it.
	fencedOut func(w *worker)
}

func newSupervisor(h *hub, changed func()) *supervisor {
	return &supervisor{hub: h, changed: changed}
}

// errStopping is returned by start once the dashboard is shutting down.
var errStopping = errors.New("the dashboard is shutting down")

// start starts an agent process. raceID, if set, puts it in that race.
func (s *supervisor) start(id, kind, lang, raceID string, ac agentCommand) (*worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, errStopping
	}
	cmd := exec.Command(ac.Path, ac.Args...)
	cmd.Env = append(os.Environ(), ac.Env...)
	cmd.SysProcAttr = agentProcAttr()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	stdin, stdout, err := procs.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting the %s agent: %w", kind, err)
	}
	w := &worker{ID: id, Kind: kind, Lang: lang, PID: cmd.Process.Pid, State: "starting", Race: raceID,
		Alive: true, StartedAt: time.Now(), cmd: cmd, stdin: stdin, done: make(chan struct{})}
	s.workers = append(s.workers, w)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); s.readReports(w, stdout) }()
	go func() { defer readers.Done(); s.readStderr(w, stderr) }()
	go func() {
		readers.Wait()
		err := cmd.Wait()
		s.exited(w, err)
	}()
	return w, nil
}

// newRace registers a race of the given members.
func (s *supervisor) newRace(id, kind string) *race {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &race{ID: id, Kind: kind, Started: time.Now()}
	s.races = append(s.races, r)
	return r
}

// join adds a started worker to a race.
func (s *supervisor) join(r *race, w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Members = append(r.Members, w.ID)
}

// readReports reads an agent's JSON lines and updates its worker.
func (s *supervisor) readReports(w *worker, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Type == "" {
			s.hub.log(logEntry{Source: w.ID, Kind: w.Kind, Lang: w.Lang, Level: "info", Text: sc.Text()})
			continue
		}
		s.apply(w, l)
	}
}

// readStderr shows what an agent writes to stderr as warnings.
func (s *supervisor) readStderr(w *worker, r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.hub.log(logEntry{Source: w.ID, Kind: w.Kind, Lang: w.Lang, Level: "warn", Text: sc.Text()})
	}
}

// apply updates a worker from one of its lines and logs the line.
func (s *supervisor) apply(w *worker, l line) {
	e := logEntry{TS: l.TS, Source: w.ID, Kind: w.Kind, Lang: w.Lang}
	s.mu.Lock()
	switch l.Type {
	case "tool":
		e.Level, e.Tool, e.Args, e.Result, e.Error, e.MS = "tool", l.Tool, l.Args, l.Result, l.Error, l.MS
	case "ready":
		found := num(l.Data, "found")
		w.ready, w.State, w.Detail = true, "at barrier", fmt.Sprintf("discovered %d claimable run(s); waiting for the other racers", found)
		e.Level, e.Event, e.Text = "event", "ready", fmt.Sprintf("at the race barrier: discovered %d claimable run(s)", found)
	default:
		e.Level, e.Event, e.Text = "event", l.Event, l.Msg
		s.applyEvent(w, l)
	}
	release := s.releasableLocked(w.Race)
	s.mu.Unlock()
	s.hub.log(e)
	if release != nil {
		s.release(release)
	}
	s.changed()
}

func num(d map[string]any, k string) int64 {
	switch v := d[k].(type) {
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	return 0
}

func str(d map[string]any, k string) string {
	v, _ := d[k].(string)
	return v
}

// applyEvent moves a worker's state on an event; s.mu is held.
func (s *supervisor) applyEvent(w *worker, l line) {
	d := l.Data
	switch l.Event {
	case "started":
		w.State, w.Detail = "discovering", l.Msg
	case "discovered":
		w.State, w.Detail, w.RunID = "claiming", l.Msg, str(d, "run_id")
	case "standby":
		w.State, w.Detail, w.RunID = "standby", l.Msg, str(d, "run_id")
	case "claimed":
		w.State, w.Detail, w.RunID = "working", "", str(d, "run_id")
		w.Attempt, w.Fence = num(d, "attempt"), num(d, "fence")
	case "lost":
		w.State, w.Detail = "lost race", str(d, "reason")
	case "resumed":
		w.Step, w.Total = num(d, "last_step"), num(d, "total")
		w.ResumedFrom = w.Step
		w.Detail = l.Msg
	case "step":
		w.Step, w.Total, w.Detail = num(d, "step"), num(d, "total"), l.Msg
	case "waiting":
		w.State, w.Detail = "waiting", l.Msg
	case "done", "report":
		w.State, w.Detail = "done", l.Msg
		if t := num(d, "total"); t > 0 {
			w.Step, w.Total = t, t
		}
	case "idle":
		w.State, w.Detail = "idle", l.Msg
	case "fenced_out":
		w.State, w.Detail = "fenced out", l.Msg
	case "error":
		w.State, w.Detail = "failed", l.Msg
	case "published", "lease_wait":
		w.Detail = l.Msg
	}
}

// releasableLocked returns the race to release once every member is at the
// barrier or gone; s.mu is held.
func (s *supervisor) releasableLocked(raceID string) *race {
	if raceID == "" {
		return nil
	}
	for _, r := range s.races {
		if r.ID != raceID || r.Released || len(r.Members) == 0 {
			continue
		}
		for _, id := range r.Members {
			w := s.byIDLocked(id)
			if w == nil || (w.Alive && !w.ready) {
				return nil
			}
		}
		r.Released = true
		return r
	}
	return nil
}

// release lets a race's agents go at once: "go" on each one's stdin.
func (s *supervisor) release(r *race) {
	s.mu.Lock()
	var ws []*worker
	for _, id := range r.Members {
		if w := s.byIDLocked(id); w != nil && w.Alive {
			ws = append(ws, w)
		}
	}
	s.mu.Unlock()
	s.hub.system("event", fmt.Sprintf("Race %s: all %d %s agents discovered the run; releasing them to claim it at once",
		r.ID, len(ws), kindTitle(r.Kind)))
	for _, w := range ws {
		_, _ = io.WriteString(w.stdin, "go\n")
	}
}

// releaseRace releases a race whether or not every member reached the
// barrier (after a deadline), so a stuck member cannot hold the others.
func (s *supervisor) releaseRace(raceID string) {
	s.mu.Lock()
	var rel *race
	for _, r := range s.races {
		if r.ID == raceID && !r.Released {
			r.Released, rel = true, r
		}
	}
	s.mu.Unlock()
	if rel != nil {
		s.release(rel)
	}
}

func (s *supervisor) byIDLocked(id string) *worker {
	for _, w := range s.workers {
		if w.ID == id {
			return w
		}
	}
	return nil
}

// exited records the end of an agent process.
func (s *supervisor) exited(w *worker, err error) {
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	s.mu.Lock()
	w.Alive, w.EndedAt, w.Exit = false, time.Now(), &code
	msg := ""
	switch {
	case w.Killed:
		w.State = "crashed"
		msg = fmt.Sprintf("%s (pid %d) was killed with SIGKILL: no cleanup ran, its claim stays until it expires", w.ID, w.PID)
	case code == exitOrphaned:
		w.State = "orphaned"
	case code != 0 && (w.State != "failed" && w.State != "fenced out"):
		w.State = "failed"
		msg = fmt.Sprintf("%s exited with status %d", w.ID, code)
	case w.State == "starting" || w.State == "discovering" || w.State == "claiming" || w.State == "working" || w.State == "at barrier":
		w.State = "exited"
	}
	release := s.releasableLocked(w.Race)
	stopping := s.stopping
	fencedOut := s.fencedOut
	s.mu.Unlock()
	close(w.done)
	if code == exitFencedOut && fencedOut != nil && !stopping {
		go fencedOut(w)
	}
	if msg != "" && !stopping {
		level := "error"
		if w.Killed {
			level = "warn"
		}
		s.hub.system(level, msg)
	}
	if release != nil && !stopping {
		s.release(release)
	}
	s.changed()
}

// kill SIGKILLs a worker: a crash, no cleanup.
func (s *supervisor) kill(w *worker) error {
	s.mu.Lock()
	w.Killed = true
	s.mu.Unlock()
	return w.cmd.Process.Kill()
}

// freeze stops a worker's process (SIGSTOP) or, with thaw, continues it
// (SIGCONT).
func (s *supervisor) freeze(w *worker, thaw bool) error {
	if err := stopProcess(w.cmd.Process, thaw); err != nil {
		return err
	}
	s.mu.Lock()
	w.Frozen, w.Thawed = !thaw, thaw
	s.mu.Unlock()
	return nil
}

// snapshot returns copies of the workers and races, newest first.
func (s *supervisor) snapshot() ([]worker, []race) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := make([]worker, 0, len(s.workers))
	for _, w := range slices.Backward(s.workers) {
		c := *w
		c.cmd, c.stdin, c.done = nil, nil, nil
		ws = append(ws, c)
	}
	rs := make([]race, 0, len(s.races))
	for _, r := range slices.Backward(s.races) {
		c := *r
		c.Members = slices.Clone(r.Members)
		rs = append(rs, c)
	}
	return ws, rs
}

// find returns the live workers matching keep.
func (s *supervisor) find(keep func(w *worker) bool) []*worker {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*worker
	for _, w := range s.workers {
		if keep(w) {
			out = append(out, w)
		}
	}
	return out
}

// stopAll kills every agent still running and waits for each to be gone.
// With forever, no agent can be started afterwards (the dashboard exits);
// otherwise the board is cleared for a new demo.
func (s *supervisor) stopAll(forever bool, timeout time.Duration) error {
	s.mu.Lock()
	s.stopping = true
	ws := slices.Clone(s.workers)
	s.mu.Unlock()
	for _, w := range ws {
		select {
		case <-w.done:
		default:
			_ = w.stdin.Close()
			_ = w.cmd.Process.Kill()
		}
	}
	deadline := time.After(timeout)
	var stuck []string
	for _, w := range ws {
		select {
		case <-w.done:
		case <-deadline:
			stuck = append(stuck, strconv.Itoa(w.PID))
		}
	}
	s.mu.Lock()
	if !forever {
		s.stopping = false
		s.workers, s.races = nil, nil
	}
	s.mu.Unlock()
	if len(stuck) > 0 {
		return fmt.Errorf("agent processes %v did not exit", stuck)
	}
	return nil
}
