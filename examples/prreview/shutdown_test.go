package main

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/examples/internal/procs"
	"github.com/statesidecar/state/examples/prreview/review"

	"github.com/statesidecar/state/internal/syncbuf"
)

// startProcess runs the whole program (this test binary playing main) as a
// process of its own, and returns it with a harness on its dashboard.
func startProcess(t *testing.T) (*exec.Cmd, *harness, chan error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-addr", "127.0.0.1:0", "-claim-ttl", "3s")
	// Its own sidecar's directory goes under the test's temporary
	// directory, removed even when the test kills the program.
	cmd.Env = append(os.Environ(), "PRREVIEW_TEST_MAIN=1", "TMPDIR="+t.TempDir())
	stderr := &syncbuf.Buffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "PR-review demo: open "); ok {
				urls <- u
			}
		}
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("prreview stderr:\n%s", stderr.String())
		}
	})
	select {
	case u := <-urls:
		return cmd, &harness{URL: u}, done
	case err := <-done:
		t.Fatalf("prreview exited: %v\n%s", err, stderr.String())
	case <-time.After(wait):
		t.Fatal("prreview did not print its URL")
	}
	return nil, nil, nil
}

// spawnMany starts agents of every kind, some mid-review and some at a race
// barrier or standing by, and returns their PIDs once all are running.
func spawnMany(t *testing.T, h *harness) []int {
	t.Helper()
	h.ok(t, "pr", map[string]string{"input": "bundled:" + review.TalkPR})
	h.ok(t, "register", nil)
	h.ok(t, "pace", map[string]string{"pace": "slow"})
	h.ok(t, "spawn", map[string]any{"kind": "security"})
	h.ok(t, "spawn", map[string]any{"kind": "style"})
	h.waitState(t, "two agents are working", func(s snapshot) bool {
		n := 0
		for _, w := range s.Workers {
			if w.State == "working" {
				n++
			}
		}
		return n == 2
	})
	h.ok(t, "spawn", map[string]any{"kind": "security"}) // stands by behind the first
	h.ok(t, "spawn", map[string]any{"kind": "performance", "count": 3})
	s := h.waitState(t, "six agents run", func(s snapshot) bool {
		alive := 0
		for _, w := range s.Workers {
			if w.Alive {
				alive++
			}
		}
		return alive >= 4 && len(s.Workers) == 6
	})
	var pids []int
	for _, w := range s.Workers {
		if w.Alive {
			pids = append(pids, w.PID)
		}
	}
	return pids
}

// Ctrl-C (SIGINT) stops the dashboard, and no agent survives it.
func TestCtrlCStopsEveryAgent(t *testing.T) {
	cmd, h, done := startProcess(t)
	pids := spawnMany(t, h)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("prreview after Ctrl-C: %v, want exit status 0", err)
		}
	case <-time.After(wait):
		t.Fatal("prreview did not exit after Ctrl-C")
	}
	// The dashboard waited for each agent before exiting: none may run now.
	for _, pid := range pids {
		if !procs.Gone(pid) {
			t.Errorf("agent pid %d survived the dashboard's exit", pid)
		}
	}
}

// Even a dashboard killed without any cleanup takes its agents with it:
// they notice their stdin closing (and, on Linux, get the parent-death
// signal).
func TestAgentsDieWithAKilledDashboard(t *testing.T) {
	cmd, h, done := startProcess(t)
	pids := spawnMany(t, h)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	deadline := time.Now().Add(wait)
	for _, pid := range pids {
		for !procs.Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("agent pid %d still runs after its dashboard was killed", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
