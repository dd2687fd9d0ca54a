package sqlitestate_test

// Tests in this file run the test binary again as child processes (see
// TestMain), so that several OS processes share one database file the way
// sidecar replicas and crashed agents do.

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/sqlitestate"
	"go.uber.org/goleak"
)

const (
	childRoleEnv  = "SQLITESTATE_TEST_CHILD"
	childDBEnv    = "SQLITESTATE_TEST_DB"
	childOrderEnv = "SQLITESTATE_TEST_ORDER"
	runsPerTest   = 20
)

func TestMain(m *testing.M) {
	if role := os.Getenv(childRoleEnv); role != "" {
		os.Exit(runChild(role, os.Getenv(childDBEnv)))
	}
	code := m.Run()
	if code == 0 {
		// No goroutine may outlive the tests: not a batcher, a keep-alive
		// or a sweeper of a store that was closed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// runChild plays one role in a multi-process test, reporting on stdout one
// line per fact: "claim <run> <agent>", "lease <resource> <holder>",
// "ack <key> <value>", "err <message>".
func runChild(role, db string) int {
	ctx := context.Background()
	// A lock timeout far above the default 5 s: these tests check that
	// contention never reaches a caller as an error, not how fast the other
	// process lets go, which on a busy machine (load 28, the race detector)
	// has taken longer than 5 s.
	st, err := state.Open(ctx, "sqlite://"+db+"?lock_timeout=2m")
	if err != nil {
		fmt.Println("err open:", err)
		return 1
	}
	defer st.Close()
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	me := strconv.Itoa(os.Getpid())
	switch role {
	case "race":
		out.printf("ready")
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil { // the parent starts both children at once
			out.printf("err stdin: %v", err)
			return 1
		}
		page, err := st.ListRuns(ctx, state.WithLimit(runsPerTest))
		if err != nil {
			out.printf("err list: %v", err)
			return 1
		}
		runs := page.Runs
		if os.Getenv(childOrderEnv) == "reverse" { // the two children meet in the middle
			slices.Reverse(runs)
		}
		var wg sync.WaitGroup
		for _, r := range runs {
			for g := range 8 {
				wg.Go(func() {
					agent := fmt.Sprintf("p%s-g%d", me, g)
					_, err := st.ClaimRun(ctx, r.ID, agent)
					switch {
					case err == nil:
						out.printf("claim %s %s", r.ID, agent)
					case !errors.Is(err, state.ErrClaimed):
						out.printf("err claim: %v", err)
					}
					res := "res-" + r.ID
					_, err = st.TryAcquireLease(ctx, res, agent, time.Hour)
					switch {
					case err == nil:
						out.printf("lease %s %s", res, agent)
					case !errors.Is(err, state.ErrLeaseHeld):
						out.printf("err lease: %v", err)
					}
					for i := range 10 {
						if _, err := st.Set(ctx, fmt.Sprintf("%s/%s/%d", agent, r.ID, i), i); err != nil {
							out.printf("err set: %v", err)
						}
					}
				})
			}
		}
		wg.Wait()
	case "writer":
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := 0; ; i++ {
					key := fmt.Sprintf("p%s-g%d-%d", me, g, i)
					if _, err := st.Set(ctx, key, i); err != nil {
						out.printf("err set: %v", err)
						return
					}
					out.printf("ack %s %d", key, i)
				}
			})
		}
		wg.Wait()
	case "hold":
		// Hold the write lock, as a process in a long transaction (or a
		// stuck one) would, until the parent says stop.
		raw, err := sql.Open("sqlite", "file:"+db)
		if err != nil {
			out.printf("err open: %v", err)
			return 1
		}
		defer raw.Close()
		conn, err := raw.Conn(ctx)
		if err != nil {
			out.printf("err conn: %v", err)
			return 1
		}
		if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			out.printf("err begin: %v", err)
			return 1
		}
		out.printf("locked")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		_, _ = conn.ExecContext(ctx, "ROLLBACK")
		out.printf("unlocked")
	default:
		out.printf("err unknown role %q", role)
		return 1
	}
	return 0
}

// lineWriter writes whole lines from many goroutines and flushes each, so a
// line the parent reads was complete when written.
type lineWriter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
	l.w.Flush()
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, role, db string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), childRoleEnv+"="+role, childDBEnv+"="+db), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, lines: make(chan string, 1024)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return c
}

// next returns the child's next line, failing the test if none comes.
func (c *child) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("child exited early")
		}
		return l
	case <-time.After(2 * time.Minute):
		t.Fatal("child said nothing for two minutes")
	}
	return ""
}

func TestTwoProcessesRacingOnOneFileHaveOneWinnerEach(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "shared.db")
	st, err := state.Open(ctx, "sqlite://"+db)
	is.NoErr(err)
	for range runsPerTest {
		_, err := st.CreateRun(ctx, "job", nil)
		is.NoErr(err)
	}
	is.NoErr(st.Close())

	kids := []*child{startChild(t, "race", db), startChild(t, "race", db, childOrderEnv+"=reverse")}
	for _, k := range kids {
		is.Equal(k.next(t), "ready")
	}
	for _, k := range kids {
		_, err := io.WriteString(k.stdin, "go\n")
		is.NoErr(err)
	}
	claims, leases := map[string][]string{}, map[string][]string{}
	byProcess := map[int]int{}
	for i, k := range kids {
		for l := range k.lines {
			f := strings.Fields(l)
			switch f[0] {
			case "claim":
				claims[f[1]] = append(claims[f[1]], f[2])
				byProcess[i]++
			case "lease":
				leases[f[1]] = append(leases[f[1]], f[2])
			case "err":
				t.Errorf("child %d: %s", i, l) // no error may reach a caller, "database is locked" least of all
			}
		}
		is.NoErr(k.cmd.Wait())
	}
	is.Equal(len(claims), runsPerTest) // every run was claimed
	for run, winners := range claims {
		if len(winners) != 1 {
			t.Errorf("run %s claimed by %v: 16 claimers in two processes must give exactly one winner", run, winners)
		}
	}
	is.Equal(len(leases), runsPerTest) // every lease was acquired
	for res, holders := range leases {
		if len(holders) != 1 {
			t.Errorf("lease %s held by %v: exactly one holder across processes", res, holders)
		}
	}
	t.Logf("claims won per process: %v", byProcess)

	st, err = state.Open(ctx, "sqlite://"+db)
	is.NoErr(err)
	defer st.Close()
	for run, winners := range claims {
		r, err := st.GetRun(ctx, run)
		is.NoErr(err)
		is.Equal(r.AgentID, winners[0]) // the stored run names the winner the process was told about
	}
	h, err := st.Health(ctx)
	is.NoErr(err)
	is.Equal(h.Keys, int64(2*8*runsPerTest*10)) // every acknowledged write of both processes is there
}

func TestKilledWriterLosesNoAcknowledgedWrite(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "killed.db")
	st, err := state.Open(ctx, "sqlite://"+db)
	is.NoErr(err)
	is.NoErr(st.Close())

	k := startChild(t, "writer", db)
	acked := map[string]string{}
	for len(acked) < 500 {
		f := strings.Fields(k.next(t))
		if f[0] == "err" {
			t.Fatalf("writer: %v", f)
		}
		acked[f[1]] = f[2]
	}
	is.NoErr(k.cmd.Process.Signal(syscall.SIGKILL)) // in the middle of the write load
	for l := range k.lines {                        // acknowledgements written before the kill count too
		if f := strings.Fields(l); f[0] == "ack" {
			acked[f[1]] = f[2]
		}
	}
	_ = k.cmd.Wait()

	st, err = state.Open(ctx, "sqlite://"+db)
	is.NoErr(err)
	defer st.Close()
	for key, want := range acked {
		e, err := st.Get(ctx, key)
		if err != nil {
			t.Fatalf("acknowledged write %s lost after SIGKILL: %v", key, err)
		}
		is.Equal(string(e.Value), want) // an acknowledged write survives SIGKILL with its value
	}
	t.Logf("%d acknowledged writes survived", len(acked))

	raw, err := sql.Open("sqlite", db)
	is.NoErr(err)
	defer raw.Close()
	var check string
	is.NoErr(raw.QueryRow("PRAGMA integrity_check").Scan(&check))
	is.Equal(check, "ok") // the file is intact after the kill
}
