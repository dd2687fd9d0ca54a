package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Bouncer is a PgBouncer process owned by a test, in transaction pooling
// mode, in front of one database: each transaction of a client may run on a
// different server connection, so a client must keep no session state
// between transactions.
type Bouncer struct {
	Port int
	db   *url.URL
	cmd  *exec.Cmd
	dir  string
}

// StartBouncer starts PgBouncer on a spare loopback port in front of the
// database of dbURL (whose server must accept its user without a password),
// or skips the test when pgbouncer is not installed.
func StartBouncer(t testing.TB, dbURL string) *Bouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Skipf("pgbouncer is not installed (apt-get install pgbouncer): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	dir, err := os.MkdirTemp("", "pgbouncer-")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	b := &Bouncer{Port: freePort(t), db: u, dir: dir}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	user := u.User.Username()
	dbname := strings.TrimPrefix(u.Path, "/")
	conf := fmt.Sprintf(`[databases]
%s = host=%s port=%s dbname=%s user=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = any
pool_mode = transaction
max_client_conn = 500
default_pool_size = 20
logfile = %s
pidfile = %s
`, dbname, host, port, dbname, user, b.Port, filepath.Join(dir, "pgbouncer.log"), filepath.Join(dir, "pgbouncer.pid"))
	path := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	args := []string{path}
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		args = []string{"-u", "postgres", path}
	}
	b.cmd = exec.Command(bin, args...)
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("pgtest: starting pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(Wait):
			_ = b.cmd.Process.Kill()
		}
	})
	deadline := time.Now().Add(Wait)
	for {
		c, err := net.DialTimeout("tcp", b.addr(), time.Second)
		if err == nil {
			c.Close()
			return b
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("pgtest: pgbouncer exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgtest: pgbouncer does not listen after %v", Wait)
		}
		time.Sleep(20 * time.Millisecond) // polling another process's readiness
	}
}

func (b *Bouncer) addr() string { return "127.0.0.1:" + strconv.Itoa(b.Port) }

// URL returns the URL of the database through PgBouncer, with the
// database URL's parameters and params ("name=value") added.
func (b *Bouncer) URL(params ...string) string {
	v := *b.db
	v.Host = b.addr()
	q := v.Query()
	for _, kv := range params {
		k, val, _ := strings.Cut(kv, "=")
		q.Set(k, val)
	}
	v.RawQuery = q.Encode()
	return v.String()
}
