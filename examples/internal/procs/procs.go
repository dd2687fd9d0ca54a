// Package procs checks, for the examples that start processes of their
// own, that a child process is gone.
package procs

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Gone reports whether the process pid no longer runs. A zombie (exited,
// waiting for its parent to reap it) does not run either.
func Gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}
