// Package proctest checks a store shared by several operating-system
// processes, the way sidecar replicas and crashed agents share one: the
// test binary runs itself again as child processes, each opening the same
// store URL, and the parent checks what they were told against what the
// store holds. A test package calls Child first thing in its TestMain.
package proctest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/statesidecar/state"
)

const (
	roleEnv  = "PROCTEST_ROLE"
	urlEnv   = "PROCTEST_URL"
	orderEnv = "PROCTEST_ORDER"
	// Runs is how many runs the race test creates.
	Runs = 20
	// fenceRounds is how many times each child takes the fenced lease.
	fenceRounds = 40
)

// Child plays the role the environment names and exits, when this process
// is a child of one of this package's tests; otherwise it returns at once.
func Child() {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(runChild(role, os.Getenv(urlEnv)))
	}
}

// lineWriter writes whole lines from many goroutines, flushing each, so
// that a line the parent reads was complete when written.
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

// runChild plays one role, reporting on stdout one line per fact: "ready",
// "claim <run> <agent>", "lease <resource> <holder>", "ack <key> <value>",
// "fence <n> <start ns> <end ns>", "err <message>".
func runChild(role, url string) int {
	ctx := context.Background()
	out := &lineWriter{w: bufio.NewWriter(os.Stdout)}
	st, err := state.Open(ctx, url)
	if err != nil {
		out.printf("err open: %v", err)
		return 1
	}
	defer st.Close()
	me := strconv.Itoa(os.Getpid())
	wait := func() bool {
		out.printf("ready")
		_, err := bufio.NewReader(os.Stdin).ReadString('\n') // the parent starts every child at once
		return err == nil
	}
	switch role {
	case "race":
		page, err := st.ListRuns(ctx, state.WithLimit(Runs))
		if err != nil {
			out.printf("err list: %v", err)
			return 1
		}
		runs := page.Runs
		if os.Getenv(orderEnv) == "reverse" { // the children meet in the middle
			slices.Reverse(runs)
		}
		if !wait() {
			return 1
		}
		start := time.Now().UnixNano()
		defer func() { out.printf("span %d %d", start, time.Now().UnixNano()) }()
		var wg sync.WaitGroup
		for _, r := range runs {
			for g := range 8 {
				wg.Go(func() {
					agent := fmt.Sprintf("p%s-g%d", me, g)
					if _, err := st.ClaimRun(ctx, r.ID, agent); err == nil {
						out.printf("claim %s %s", r.ID, agent)
					} else if !errors.Is(err, state.ErrClaimed) {
						out.printf("err claim: %v", err)
					}
					res := "res-" + r.ID
					if _, err := st.TryAcquireLease(ctx, res, agent, time.Hour); err == nil {
						out.printf("lease %s %s", res, agent)
					} else if !errors.Is(err, state.ErrLeaseHeld) {
						out.printf("err lease: %v", err)
					}
					for i := range 3 {
						if _, err := st.Set(ctx, fmt.Sprintf("%s/%s/%d", agent, r.ID, i), i); err != nil {
							out.printf("err set: %v", err)
						}
					}
				})
			}
		}
		wg.Wait()
	case "fence":
		if !wait() {
			return 1
		}
		for n := 0; n < fenceRounds; {
			start := time.Now().UnixNano()
			l, err := st.TryAcquireLease(ctx, "fenced", me, time.Minute)
			end := time.Now().UnixNano()
			switch {
			case errors.Is(err, state.ErrLeaseHeld):
				continue
			case err != nil:
				out.printf("err acquire: %v", err)
				return 1
			}
			out.printf("fence %d %d %d", l.Fence, start, end)
			if _, err := st.ReleaseLease(ctx, "fenced", me); err != nil {
				out.printf("err release: %v", err)
				return 1
			}
			n++
		}
	case "writer", "share":
		if role == "share" && !wait() {
			return 1
		}
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
	default:
		out.printf("err unknown role %q", role)
		return 1
	}
	return 0
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startChild(t *testing.T, role, url string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role, urlEnv+"="+url), env...)
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

// startTogether starts n children of role behind a barrier: each reports
// ready, then all are told to go at once.
func startTogether(t *testing.T, role, url string, n int) []*child {
	t.Helper()
	kids := make([]*child, n)
	for i := range kids {
		var env []string
		if i%2 == 1 {
			env = append(env, orderEnv+"=reverse")
		}
		kids[i] = startChild(t, role, url, env...)
	}
	for i, k := range kids {
		if l := k.next(t); l != "ready" {
			t.Fatalf("child %d: %s", i, l)
		}
	}
	for _, k := range kids {
		if _, err := io.WriteString(k.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	return kids
}

// Race has two processes race, eight goroutines each, to claim the same
// runs, take the same leases and write keys, and checks that every run
// and lease has exactly one winner, that the store names the winner each
// process was told about, and that every acknowledged write is there.
func Race(t *testing.T, url string) {
	ctx := context.Background()
	st, err := state.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range Runs {
		if _, err := st.CreateRun(ctx, "job", nil); err != nil {
			t.Fatal(err)
		}
	}
	kids := startTogether(t, "race", url, 2)
	claims, leases := map[string][]string{}, map[string][]string{}
	byProcess := map[int]int{}
	var spans [][2]int64
	for i, k := range kids {
		for l := range k.lines {
			f := strings.Fields(l)
			switch f[0] {
			case "span":
				a, _ := strconv.ParseInt(f[1], 10, 64)
				b, _ := strconv.ParseInt(f[2], 10, 64)
				spans = append(spans, [2]int64{a, b})
			case "claim":
				claims[f[1]] = append(claims[f[1]], f[2])
				byProcess[i]++
			case "lease":
				leases[f[1]] = append(leases[f[1]], f[2])
			case "err":
				t.Errorf("child %d: %s", i, l)
			}
		}
		if err := k.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v", i, err)
		}
	}
	if len(claims) != Runs || len(leases) != Runs {
		t.Errorf("%d runs claimed and %d leases taken, want %d of each", len(claims), len(leases), Runs)
	}
	for run, winners := range claims {
		if len(winners) != 1 {
			t.Errorf("run %s claimed by %v: claimers in two processes must give exactly one winner", run, winners)
		}
		r, err := st.GetRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if r.AgentID != winners[0] {
			t.Errorf("run %s: the store names %s, the process was told %s won", run, r.AgentID, winners[0])
		}
	}
	for res, holders := range leases {
		if len(holders) != 1 {
			t.Errorf("lease %s held by %v: exactly one holder across processes", res, holders)
		}
	}
	t.Logf("claims won per process: %v", byProcess)
	if len(spans) == 2 {
		overlap := min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])
		t.Logf("the processes ran for %v and %v, together for %v",
			time.Duration(spans[0][1]-spans[0][0]), time.Duration(spans[1][1]-spans[1][0]), time.Duration(overlap))
		if overlap <= 0 {
			t.Error("the two processes' races did not overlap")
		}
	}
	h, err := st.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * 8 * Runs * 3); h.Keys != want {
		t.Errorf("%d keys stored, want every acknowledged write of both processes, %d", h.Keys, want)
	}
}

// Fences has two processes take and release one lease in turn, and checks
// that its fence grows: an acquisition that ended before another began
// has the lower fence, and no fence is given twice.
func Fences(t *testing.T, url string) {
	kids := startTogether(t, "fence", url, 2)
	type taken struct{ fence, start, end int64 }
	var all []taken
	for i, k := range kids {
		for l := range k.lines {
			f := strings.Fields(l)
			switch f[0] {
			case "fence":
				var tk taken
				tk.fence, _ = strconv.ParseInt(f[1], 10, 64)
				tk.start, _ = strconv.ParseInt(f[2], 10, 64)
				tk.end, _ = strconv.ParseInt(f[3], 10, 64)
				all = append(all, tk)
			case "err":
				t.Errorf("child %d: %s", i, l)
			}
		}
		if err := k.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v", i, err)
		}
	}
	if len(all) != 2*fenceRounds {
		t.Fatalf("%d acquisitions, want %d", len(all), 2*fenceRounds)
	}
	seen := map[int64]bool{}
	for _, a := range all {
		if seen[a.fence] {
			t.Errorf("fence %d given twice", a.fence)
		}
		seen[a.fence] = true
		for _, b := range all {
			if a.end < b.start && a.fence >= b.fence {
				t.Errorf("fence went back: %d was taken before %d began", a.fence, b.fence)
			}
		}
	}
}

// Share has two processes write as fast as they can for a while, eight
// goroutines each, and checks that neither starves: each has at least a
// tenth of the writes acknowledged in the time both ran.
func Share(t *testing.T, url string) {
	kids := startTogether(t, "share", url, 2)
	deadline := time.After(3 * time.Second)
	acks := make([]int, 2)
	counting := true
	for counting {
		select {
		case l := <-kids[0].lines:
			acks[0] += countAck(t, 0, l)
		case l := <-kids[1].lines:
			acks[1] += countAck(t, 1, l)
		case <-deadline:
			counting = false
		}
	}
	t.Logf("writes acknowledged per process in 3s: %v", acks)
	total := acks[0] + acks[1]
	for i, n := range acks {
		if n*10 < total {
			t.Errorf("process %d had %d of %d writes: it starved", i, n, total)
		}
	}
}

func countAck(t *testing.T, i int, l string) int {
	switch {
	case strings.HasPrefix(l, "ack "):
		return 1
	case strings.HasPrefix(l, "err "):
		t.Errorf("child %d: %s", i, l)
	}
	return 0
}

// KilledWriter kills (SIGKILL) a process in the middle of a write load and
// checks that every write it acknowledged is in the store, with its value,
// when the store is opened again; check, if set, then looks at the store
// (that what it holds reads back whole, say).
func KilledWriter(t *testing.T, url string, check func(t *testing.T, st *state.Store)) {
	ctx := context.Background()
	k := startChild(t, "writer", url)
	acked := map[string]string{}
	for len(acked) < 300 {
		f := strings.Fields(k.next(t))
		if f[0] == "err" {
			t.Fatalf("writer: %v", f)
		}
		acked[f[1]] = f[2]
	}
	if err := k.cmd.Process.Signal(syscall.SIGKILL); err != nil { // in the middle of the write load
		t.Fatal(err)
	}
	for l := range k.lines { // acknowledgements written before the kill count too
		if f := strings.Fields(l); f[0] == "ack" {
			acked[f[1]] = f[2]
		}
	}
	_ = k.cmd.Wait()
	st, err := state.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for key, want := range acked {
		e, err := st.Get(ctx, key)
		if err != nil {
			t.Fatalf("acknowledged write %s lost after SIGKILL: %v", key, err)
		}
		if string(e.Value) != want {
			t.Fatalf("acknowledged write %s = %s after SIGKILL, want %s", key, e.Value, want)
		}
	}
	t.Logf("%d acknowledged writes survived", len(acked))
	if check != nil {
		check(t, st)
	}
}
