package s3test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"
)

// EnvGateway names the variable holding the path of a versitygw binary
// (v1.8.0: `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`).
// When EnvURL is unset and EnvGateway is set, the first test needing an S3
// server starts a throwaway gateway for the whole test process, on a spare
// loopback port over a temporary directory, and sets EnvURL to it (and the
// AWS credential variables, when the environment has none), so that the
// processes the tests start find it too. The package's TestMain calls
// StopGateway, which stops it and deletes the directory; should the test
// process die first, the gateway is killed with it (on Linux).
const EnvGateway = "STATE_TEST_VERSITYGW"

var gateway struct {
	once sync.Once
	err  error
	mu   sync.Mutex
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when the gateway has exited
}

// ensureGateway starts the gateway of EnvGateway, once per process.
func ensureGateway() error {
	gateway.once.Do(func() { gateway.err = startGateway(os.Getenv(EnvGateway)) })
	return gateway.err
}

func startGateway(bin string) error {
	dir, err := os.MkdirTemp("", "state-versitygw-")
	if err != nil {
		return err
	}
	meta, data := filepath.Join(dir, "meta"), filepath.Join(dir, "data")
	for _, d := range []string{meta, data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return err
		}
	}
	addr, err := spareAddr()
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if ak == "" || sk == "" {
		ak, sk = "state-test", "state-test-secret-key"
		_ = os.Setenv("AWS_ACCESS_KEY_ID", ak)
		_ = os.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	}
	logPath := filepath.Join(dir, "versitygw.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	// --keep-alive as AWS does (versitygw closes each connection after one
	// request otherwise); --quiet: no request log.
	cmd := exec.Command(bin, "--port", addr, "--access", ak, "--secret", sk, "--keep-alive", "--quiet",
		"posix", "--sidecar", meta, data)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = dieWithParent()
	done := make(chan struct{})
	started := make(chan error, 1)
	// The gateway is started, and waited for, by a goroutine locked to its
	// thread: the parent-death signal follows the thread that started the
	// child, which must live as long as the child does.
	go func() {
		runtime.LockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			_ = cmd.Wait()
		}
		_ = logFile.Close()
		close(done)
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(dir)
		return fmt.Errorf("%s: starting %s: %w", EnvGateway, bin, err)
	}
	gateway.mu.Lock()
	gateway.cmd, gateway.dir, gateway.done = cmd, dir, done
	gateway.mu.Unlock()
	if err := awaitListening(addr, done); err != nil {
		log, _ := os.ReadFile(logPath)
		StopGateway()
		return fmt.Errorf("%s: %s on %s: %w; its output:\n%s", EnvGateway, bin, addr, err, log)
	}
	return os.Setenv(EnvURL, "s3://state-test?endpoint=http://"+addr+"&region=us-east-1")
}

// spareAddr returns a loopback address with a port free a moment ago.
func spareAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// awaitListening waits until addr accepts connections, the gateway exits,
// or Wait passes.
func awaitListening(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(Wait)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-exited:
			return errors.New("it exited")
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %v", Wait)
		}
	}
}

// StopGateway stops the gateway the tests started, if any, and deletes
// its directory. A package whose tests use this one calls it from its
// TestMain once the tests have run.
func StopGateway() {
	gateway.mu.Lock()
	cmd, dir, done := gateway.cmd, gateway.dir, gateway.done
	gateway.cmd = nil
	gateway.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
	_ = os.RemoveAll(dir)
}
