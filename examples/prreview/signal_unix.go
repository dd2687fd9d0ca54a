//go:build unix

package main

import (
	"os"
	"syscall"
)

// stopProcess stops p (SIGSTOP) or, with cont, continues it (SIGCONT).
func stopProcess(p *os.Process, cont bool) error {
	if cont {
		return p.Signal(syscall.SIGCONT)
	}
	return p.Signal(syscall.SIGSTOP)
}
