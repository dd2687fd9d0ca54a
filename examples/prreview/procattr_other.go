//go:build !linux

package main

import "syscall"

// agentProcAttr is the default elsewhere: agents exit when their stdin
// closes, which is how they notice the dashboard went away.
func agentProcAttr() *syscall.SysProcAttr { return nil }
