//go:build !linux

package s3test

import "syscall"

// dieWithParent is nil where there is no parent-death signal: a test
// process that dies before StopGateway leaves its gateway running.
func dieWithParent() *syscall.SysProcAttr { return nil }
