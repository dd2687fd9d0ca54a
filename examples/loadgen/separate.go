package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state/examples/internal/procs"
)

// serveFlag is the hidden flag that makes loadgen a server: it starts the
// backend it names (a sidecar, or echo) on a loopback port, writes
// "url <url>" on stdout, and serves until its stdin closes.
const serveFlag = "serve"

// serve is loadgen started with -serve: one server in a process of its own.
func serve(ctx context.Context, o options, stdin io.Reader, stdout io.Writer) error {
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	p, err := start(ctx, o, o.serve)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(stdout, "url %s\n", p.url); err != nil {
		return errors.Join(err, p.close())
	}
	_, _ = io.Copy(io.Discard, stdin) // until the parent closes it (or exits)
	return p.close()
}

// start starts backend b in this process: a sidecar, or the echo server.
func start(ctx context.Context, o options, b string) (*inProcess, error) {
	if b == echoName {
		return startEcho()
	}
	return startSidecar(ctx, b, o)
}

// child is a server that loadgen started as a process of its own.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	url   string
}

// startChild starts this program with -serve b and waits for the URL it
// serves. A CPU profile of the child goes to profile, if not "".
func startChild(ctx context.Context, o options, b, profile string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-" + serveFlag, b, "-redis-url", o.redisURL, "-postgres-url", o.postgresURL}
	if profile != "" {
		args = append(args, "-cpuprofile", profile)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, stdout, err := procs.Start(cmd)
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "url ")
	if err != nil || !ok {
		_ = c.stop()
		return nil, fmt.Errorf("server process for %s: no URL (read %q: %v)", b, line, err)
	}
	c.url = u
	return c, nil
}

// stop closes the child's stdin, which ends it, and waits for it.
func (c *child) stop() error {
	_ = c.stdin.Close()
	return c.cmd.Wait()
}

// cpu is the child's CPU time so far (user and system), from
// /proc/<pid>/stat, in clock ticks of 10ms: coarse, so rows should last
// seconds. It is 0 where there is no /proc.
func (c *child) cpu() time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64) // utime, field 14
	k, err2 := strconv.ParseInt(f[12], 10, 64) // stime, field 15
	if err1 != nil || err2 != nil {
		return 0
	}
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(u+k) * tick
}
