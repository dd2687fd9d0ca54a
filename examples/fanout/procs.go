package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/statesidecar/state/examples/internal/procs"
	"github.com/statesidecar/state/internal/syncbuf"
)

// A proc is a worker or aggregator process the orchestrator started. Its
// stdout lines arrive as events; when it has exited, an "exit" event.
type proc struct {
	id    string
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startProc starts exe with args as the process id and sends its events to
// events. Lines that are not events become "log" events.
func startProc(exe, id string, args []string, events chan<- event) (*proc, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = os.Environ()
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	stdin, stdout, err := procs.Start(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", id, err)
	}
	p := &proc{id: id, cmd: cmd, stdin: stdin}
	pid := cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var ev event
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Ev == "" {
				ev = event{Who: id, Ev: "log", Msg: sc.Text()}
			}
			ev.Who, ev.PID = id, pid
			events <- ev
		}
		_, _ = io.Copy(io.Discard, stdout)
		err := cmd.Wait()
		msg := "exited"
		if err != nil {
			msg = "exited: " + err.Error()
			if tail := strings.TrimSpace(stderr.String()); tail != "" {
				msg += ": " + tail
			}
		}
		events <- event{Who: id, Ev: "exit", Msg: msg, PID: pid}
	}()
	return p, nil
}
