package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/console"
	"github.com/statesidecar/state/internal/storetest"
)

// TestPagesAtScale measures the console's pages over a SQLite store of
// STATE_TEST_CONSOLE_RUNS runs (100000 in the report of issue 25). It logs
// the median time of each page; it asserts what each shows, not how fast.
//
//	STATE_TEST_CONSOLE_RUNS=100000 go test -run TestPagesAtScale -v ./console
func TestPagesAtScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STATE_TEST_CONSOLE_RUNS"))
	if n <= 0 {
		t.Skip("set STATE_TEST_CONSOLE_RUNS (e.g. 100000) to measure the pages at scale")
	}
	ctx := context.Background()
	b := storetest.New(t, "sqlite")
	st := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1, HistoryMaxEvents: 1000})
	start := time.Now()
	var wg sync.WaitGroup
	const workers = 8
	var held string
	var once sync.Once
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				r, err := st.CreateRun(ctx, fmt.Sprintf("review-%d", i), map[string]string{"pr": strconv.Itoa(i / 10), "kind": strconv.Itoa(i % 3)})
				if err != nil {
					t.Error(err)
					return
				}
				if i%100 == 0 {
					if _, err := st.ClaimRun(ctx, r.ID, "agent-"+strconv.Itoa(w), state.WithClaimTTL(time.Hour)); err != nil {
						t.Error(err)
						return
					}
					once.Do(func() { held = r.ID })
				}
			}
		})
	}
	wg.Wait()
	t.Logf("seeded %d runs in %v", n, time.Since(start).Round(time.Millisecond))
	srv := serve(t, st, console.Options{})
	for _, page := range []string{
		"/ui/",
		"/ui/runs",
		"/ui/runs?status=claimed",
		"/ui/runs?tag=pr%3D4242",
		"/ui/runs?name=review-9999",
		"/ui/runs/" + held,
		"/ui/events",
	} {
		var times []time.Duration
		var body string
		for range 5 {
			t0 := time.Now()
			code, b := get(t, srv.URL+page)
			times = append(times, time.Since(t0))
			if code != http.StatusOK {
				t.Fatalf("%s: %d %s", page, code, b)
			}
			body = b
		}
		slices.Sort(times)
		t.Logf("%-28s median %v (of 5), %d rows", page, times[2].Round(100*time.Microsecond), strings.Count(body, "<tr"))
	}
	// The second page of the runs costs what the first does.
	_, body := get(t, srv.URL+"/ui/runs")
	i := strings.Index(body, "cursor=")
	if i < 0 {
		t.Fatal("no next page")
	}
	next := body[i+len("cursor="):]
	next = next[:strings.IndexByte(next, '"')]
	t0 := time.Now()
	code, _ := get(t, srv.URL+"/ui/runs?cursor="+strings.ReplaceAll(next, "&amp;", "&"))
	t.Logf("%-28s %v (status %d)", "/ui/runs, next page", time.Since(t0).Round(100*time.Microsecond), code)
}
