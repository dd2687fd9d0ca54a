package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Cluster is a PostgreSQL cluster owned by a test: its own data directory,
// its own postmaster on 127.0.0.1:Port, trust authentication, database
// "postgres" and user "postgres". It runs as the operating system user
// "postgres" (initdb refuses to run as root) and is stopped and deleted
// when the test ends.
type Cluster struct {
	Port     int
	t        testing.TB
	bin      string   // directory of initdb, pg_ctl and pg_basebackup
	dir      string   // owned by the postgres user; the data directory is dir/data
	settings []string // extra server settings, "name=value"
	up       bool
}

// Start creates a cluster on a spare loopback port and starts it, with
// extra server settings ("name=value", such as "shared_buffers=1GB"), or
// skips the test when PostgreSQL's server programs are not installed.
func Start(t testing.TB, settings ...string) *Cluster {
	t.Helper()
	c := newCluster(t)
	c.settings = settings
	c.run("initdb", "-D", c.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	c.Restart()
	return c
}

func newCluster(t testing.TB) *Cluster {
	t.Helper()
	bin := binDir(t)
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	c := &Cluster{Port: freePort(t), t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		if c.up {
			c.stop("immediate")
		}
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 { // the server must run as postgres, and own its files
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skipf("pgtest: running as root, and there is no postgres user to run a cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
	}
	return c
}

// binDir finds PostgreSQL's server programs, or skips.
func binDir(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("pg_config"); err == nil {
		if out, err := exec.Command(p, "--bindir").Output(); err == nil {
			d := strings.TrimSpace(string(out))
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d
			}
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) > 0 {
		return filepath.Dir(matches[len(matches)-1])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Skip("pgtest: PostgreSQL's server programs (initdb, pg_ctl) are not installed")
	return ""
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs one of PostgreSQL's programs as the postgres user when we are
// root, and fails the test if it fails.
func (c *Cluster) run(prog string, args ...string) {
	c.t.Helper()
	if out, err := c.command(prog, args...).CombinedOutput(); err != nil {
		c.t.Fatalf("pgtest: %s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
}

func (c *Cluster) command(prog string, args ...string) *exec.Cmd {
	p := filepath.Join(c.bin, prog)
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", "postgres", "--", p}, args...)...)
	}
	return exec.Command(p, args...)
}

// Addr returns "127.0.0.1:<port>".
func (c *Cluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(c.Port) }

// URL returns the cluster's URL, database postgres, user postgres.
func (c *Cluster) URL() string {
	return "postgres://postgres@" + c.Addr() + "/postgres?sslmode=disable"
}

// Restart starts the cluster (again) and waits until it accepts
// connections.
func (c *Cluster) Restart() {
	c.t.Helper()
	if c.up {
		c.t.Fatalf("pgtest: cluster on port %d is already running", c.Port)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=on -c synchronous_commit=on", c.Port, c.dir)
	for _, s := range c.settings {
		opts += " -c " + s
	}
	c.run("pg_ctl", "-D", c.data(), "-o", opts, "-l", filepath.Join(c.dir, "log"), "-w", "-t", strconv.Itoa(int(Wait.Seconds())), "start")
	c.up = true
}

// Stop stops the cluster with pg_ctl's mode: "fast" (clients disconnected,
// a checkpoint written) or "immediate" (every process killed at once, as a
// crash or a power cut would; the next start recovers from the WAL).
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	c.stop(mode)
}

func (c *Cluster) stop(mode string) {
	c.t.Helper()
	if !c.up {
		return
	}
	c.resumeAll() // a paused server cannot stop
	c.run("pg_ctl", "-D", c.data(), "-m", mode, "-w", "-t", strconv.Itoa(int(Wait.Seconds())), "stop")
	c.up = false
}

// Pause freezes the postmaster and every server process (SIGSTOP): the port
// still accepts TCP connections, but nothing answers, as with a hung host.
func (c *Cluster) Pause() { c.t.Helper(); c.signalAll(syscall.SIGSTOP) }

// Resume undoes Pause.
func (c *Cluster) Resume() { c.t.Helper(); c.signalAll(syscall.SIGCONT) }

func (c *Cluster) resumeAll() {
	if pids, err := c.pids(); err == nil {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGCONT)
		}
	}
}

func (c *Cluster) signalAll(sig syscall.Signal) {
	c.t.Helper()
	pids, err := c.pids()
	if err != nil {
		c.t.Fatalf("pgtest: %v", err)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil {
			c.t.Fatalf("pgtest: signalling process %d of the cluster: %v", p, err)
		}
	}
}

// pids returns the postmaster's pid (from postmaster.pid) and its
// children's.
func (c *Cluster) pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return nil, err
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil, fmt.Errorf("reading postmaster.pid: %w", err)
	}
	pids := []int{pm}
	ch, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pm, pm))
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Fields(string(ch)) {
		if p, err := strconv.Atoi(f); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// Backup takes a base backup of the running cluster (with the WAL it needs)
// and returns it as a new, stopped cluster on another port: starting it
// later is what a failover to a replica that had not received the latest
// writes, or a restore from a backup, looks like.
func (c *Cluster) Backup() *Cluster {
	c.t.Helper()
	b := newCluster(c.t)
	c.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", "postgres", "-D", b.data(),
		"-X", "stream", "-c", "fast", "--no-sync")
	return b
}

// Exec runs SQL on the cluster's postgres database.
func (c *Cluster) Exec(sql string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		c.t.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		c.t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// WaitUntil polls cond until it holds, failing the test after Wait.
func WaitUntil(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: condition still false after %v", Wait)
		}
		time.Sleep(20 * time.Millisecond) // polling a server coming back
	}
}
