// Package redistest helps the tests of package redisstate: it reads the
// Redis URL tests run against, hands out key prefixes that no other test
// run uses and deletes their keys afterwards, and starts throwaway
// redis-server processes (single servers and clusters) on spare loopback
// ports.
package redistest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/internal/skipnote"
)

// EnvURL names the variable holding the URL of the Redis the tests use, such
// as redis://127.0.0.1:6379/0. Tests needing it skip when it is unset.
const EnvURL = "STATE_TEST_REDIS_URL"

// EnvCluster names the variable that enables the Redis Cluster tests: "1"
// starts a three-master cluster on spare loopback ports (redis-server and
// redis-cli must be on PATH); a redis:// URL with addr= parameters uses an
// existing cluster.
const EnvCluster = "STATE_TEST_REDIS_CLUSTER"

// EnvSentinel names the variable that enables the Redis Sentinel test: "1"
// starts a master and a sentinel on spare loopback ports (redis-server must
// be on PATH).
const EnvSentinel = "STATE_TEST_REDIS_SENTINEL"

// Wait bounds every wait for a server; generous, because a busy two-core
// machine may be slow, and never reached when things work.
const Wait = 60 * time.Second

// URL returns the Redis URL of EnvURL, or skips the test.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		skipnote.Note(EnvURL, "Redis")
		t.Skipf("set %s (e.g. redis://127.0.0.1:6379/0) to run the tests that need Redis", EnvURL)
	}
	return u
}

// Prefix returns a key prefix no other test or test run uses.
func Prefix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "st-test-" + hex.EncodeToString(b[:])
}

// purgeNS deletes up to 500 records, or then up to 500 events' per-key
// lists, of one namespace of package redisstate, found through the
// namespace's own structure (lua/base.lua): the records listed in its
// index, the per-key lists of event ids named by its events. When both are
// gone it deletes its indexes, counters and event log and returns 0;
// otherwise 1, to be called again. In steps, so that no call runs long
// enough to block the server or pass the client's read timeout, however
// big the namespace (a million records took a single script longer than
// that).
var purgeNS = redis.NewScript(`
local B = KEYS[1]
local ks = redis.call('ZRANGE', B .. ':idx', '0', '499')
if #ks > 0 then
  for _, k in ipairs(ks) do redis.call('DEL', B .. ':r:' .. k) end
  redis.call('ZREM', B .. ':idx', unpack(ks))
  return 1
end
local es = redis.call('LRANGE', B .. ':ev', '0', '499')
if #es > 0 then
  for _, e in ipairs(es) do
    local _, _, kl = struct.unpack('<i8i8i4i4i4i4i4', e)
    redis.call('DEL', B .. ':h:' .. string.sub(e, 37, 36 + kl))
  end
  redis.call('LTRIM', B .. ':ev', #es, -1)
  return 1
end
redis.call('DEL', B .. ':exp', B .. ':rev', B .. ':ev', B .. ':off')
return 0
`)

// Purge deletes every key of a prefix of package redisstate: those of the
// namespaces in its registry, "{<prefix>:<ns>}...", each through the
// namespace's own structure, and the registry, "{<prefix>}:namespaces". It
// costs in proportion to what the prefix holds, however big the database
// the tests share. Keys a test wrote outside that layout need PurgeScan.
func Purge(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	registry := "{" + prefix + "}:namespaces"
	nss, err := rdb.SMembers(ctx, registry).Result()
	if err != nil {
		return err
	}
	for _, ns := range nss {
		for more := true; more; {
			n, err := purgeNS.Run(ctx, rdb, []string{"{" + prefix + ":" + ns + "}"}).Int()
			if err != nil {
				return fmt.Errorf("redistest: purging namespace %s of %s: %w", ns, prefix, err)
			}
			more = n == 1
		}
	}
	return rdb.Del(ctx, registry).Err()
}

// PurgeScan deletes every key of a prefix of package redisstate, of its
// layout or not: "{<prefix>:<ns>}..." and "{<prefix>}:...". It uses SCAN, on
// every master of a cluster, which costs in proportion to the whole
// database: fine in tests of a database of their own, never in a driver.
func PurgeScan(ctx context.Context, rdb redis.UniversalClient, prefix string) error {
	purge := func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, "{"+prefix+"[:}]*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		for len(keys) > 0 { // single-key DELs, pipelined: a cluster refuses multi-slot DEL
			n := min(len(keys), 1000)
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, k := range keys[:n] {
					p.Del(ctx, k)
				}
				return nil
			})
			if err != nil {
				return err
			}
			keys = keys[n:]
		}
		return nil
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return purge(ctx, n) })
	case *redis.Client:
		return purge(ctx, c)
	}
	return fmt.Errorf("redistest: cannot purge through a %T", rdb)
}

// Binary returns the path of a Redis program (redis-server, redis-cli), or
// skips the test naming it.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not on PATH (%v): install Redis to run this test", name, err)
	}
	return p
}

// A Server is a redis-server process owned by a test. It listens on
// 127.0.0.1:Port, persists nothing and is killed when the test ends.
type Server struct {
	Port  int
	t     testing.TB
	bin   string
	dir   string
	extra []string
	conf  string // a config file to start with, for Sentinel
	cmd   *exec.Cmd
	done  chan struct{}
}

// Start starts a redis-server on a spare loopback port with extra
// arguments and waits until it answers.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return startOn(t, FreePort(t, false), extra...)
}

func startOn(t testing.TB, port int, extra ...string) *Server {
	t.Helper()
	s := &Server{Port: port, t: t, bin: Binary(t, "redis-server"), dir: t.TempDir(), extra: extra}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Addr returns "127.0.0.1:<port>".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL returns "redis://127.0.0.1:<port>".
func (s *Server) URL() string { return "redis://" + s.Addr() }

// Restart starts the server again on the same port after Stop (or starts
// it the first time) and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatalf("redistest: server on port %d is already running", s.Port)
	}
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log")}, s.extra...)
	if s.conf != "" {
		args = append([]string{s.conf}, s.extra...)
	}
	cmd := exec.Command(s.bin, args...)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("redistest: starting %s: %v", s.bin, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(s.done)
	deadline := time.Now().Add(Wait)
	for !s.answers() {
		select {
		case <-s.done:
			s.cmd = nil
			s.t.Fatalf("redistest: redis-server on port %d exited at start: %s", s.Port, s.log())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: redis-server on port %d does not answer after %v: %s", s.Port, Wait, s.log())
		}
		time.Sleep(20 * time.Millisecond) // polling another process's readiness
	}
}

// answers reports whether the server replies to PING.
func (s *Server) answers() bool {
	c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Stop kills the server (as a crash would) and waits for it to exit. It
// does nothing if the server is not running.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): it keeps its connections but answers
// nothing, like a hung host.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume unfreezes a paused server (SIGCONT).
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatalf("redistest: server on port %d is not running", s.Port)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signalling redis-server: %v", err)
	}
}

// FreePort returns a loopback TCP port nobody listens on. With bus set, the
// port 10000 above it (a cluster node's bus port) is free too.
func FreePort(t testing.TB, bus bool) int {
	t.Helper()
	for range 1000 {
		n, _ := rand.Int(rand.Reader, big.NewInt(20000))
		p := 20000 + int(n.Int64())
		if free(p) && (!bus || free(p+10000)) {
			return p
		}
	}
	t.Fatal("redistest: no free loopback port found")
	return 0
}

func free(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// StartSentinel starts a Redis Sentinel on a spare loopback port that
// monitors master under the name name, and waits until it answers and
// knows the master.
func StartSentinel(t testing.TB, master *Server, name string) *Server {
	t.Helper()
	s := &Server{Port: FreePort(t, false), t: t, bin: Binary(t, "redis-server"), dir: t.TempDir(), extra: []string{"--sentinel"}}
	s.conf = filepath.Join(s.dir, "sentinel.conf")
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\nsentinel monitor %s 127.0.0.1 %d 1\n",
		s.Port, s.dir, filepath.Join(s.dir, "redis.log"), name, master.Port)
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	t.Cleanup(s.Stop)
	c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	for {
		addr, err := c.GetMasterAddrByName(ctx, name).Result()
		if err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(master.Port) {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: sentinel does not know master %s after %v: %v", name, Wait, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the sentinel's readiness
	}
}

// StartCluster starts a Redis Cluster of n masters without replicas on
// spare loopback ports, waits until every node reports it healthy, and
// returns the nodes' addresses. The nodes are killed when the test ends.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	cli := Binary(t, "redis-cli")
	var addrs []string
	for range n {
		s := startOn(t, FreePort(t, true), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000")
		addrs = append(addrs, s.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("redistest: cluster node %s not ready after %v: %v %s", a, Wait, err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling the cluster's convergence
		}
		_ = c.Close()
	}
	return addrs
}
