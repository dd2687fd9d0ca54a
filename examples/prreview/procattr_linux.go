package main

import "syscall"

// agentProcAttr puts an agent in its own process group (the dashboard
// stops it, not the terminal's Ctrl-C) and has the kernel kill it if the
// dashboard dies without cleaning up.
func agentProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
