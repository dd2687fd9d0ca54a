package benchvs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Times is what one side of a comparison took in all: wall time, the CPU
// time of this process, and the CPU time of the server processes that
// serve its calls on this machine (0 when none was named). CPU times are
// much steadier than wall time on a machine that others load too: a call
// that waits for a core costs wall time, not CPU time.
type Times struct {
	Wall, CPU, Server time.Duration
}

// cpuMark is the CPU time used so far by this process and by each server
// process.
type cpuMark struct {
	self   time.Duration
	server map[int]time.Duration
}

func markCPU(servers func() []int) cpuMark {
	m := cpuMark{self: selfCPU()}
	if servers != nil {
		m.server = map[int]time.Duration{}
		for _, pid := range servers() {
			m.server[pid] = processCPU(pid)
		}
	}
	return m
}

// since adds to t the CPU time used from m to now (a server process that
// started meanwhile counts from 0).
func (m cpuMark) since(t *Times, servers func() []int) {
	now := markCPU(servers)
	t.CPU += now.self - m.self
	for pid, d := range now.server {
		t.Server += d - m.server[pid]
	}
}

// processCPU returns the time the threads of process pid have spent on a
// CPU (Linux: /proc/<pid>/task/*/schedstat), or 0 when it cannot tell.
func processCPU(pid int) time.Duration {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	var sum time.Duration
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		ns, err := strconv.ParseInt(strings.Fields(string(b) + " x")[0], 10, 64)
		if err == nil {
			sum += time.Duration(ns)
		}
	}
	return sum
}

// LocalProcess reports whether process pid runs on this machine and is
// named name (its /proc/<pid>/comm starts with it), so that a benchmark
// can count the CPU time of a server it reaches on localhost.
func LocalProcess(pid int, name string) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
	return err == nil && strings.HasPrefix(string(b), name)
}
