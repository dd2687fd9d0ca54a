package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/console"
	"github.com/statesidecar/state/internal/storetest"
)

// serve starts a console over st at /ui.
func serve(t *testing.T, st *state.Store, o console.Options) *httptest.Server {
	t.Helper()
	o.Store = st
	c, err := console.New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", c))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { c.Close(); srv.Close() })
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestPagesShowWhatTheStoreHolds renders every page over a store on every
// backend and checks that each shows its records.
func TestPagesShowWhatTheStoreHolds(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := context.Background()
		st := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1})
		parent, err := st.CreateRun(ctx, "review-pr", map[string]string{"pr": "42"}, state.WithJoin())
		is.NoErr(err)
		kid, err := st.CreateRun(ctx, "security", nil, state.WithParent(parent.ID))
		is.NoErr(err)
		_, err = st.ClaimRun(ctx, kid.ID, "agent-7")
		is.NoErr(err)
		_, err = st.CheckpointRun(ctx, kid.ID, 1, map[string]string{"finding": "sql injection"})
		is.NoErr(err)
		_, err = st.Set(ctx, "plan/42", map[string]int{"n": 1}, state.WithAgent("planner"))
		is.NoErr(err)
		_, err = st.TryAcquireLease(ctx, "repo/main", "merger", time.Minute)
		is.NoErr(err)
		_, err = st.SetSession(ctx, "chat-1", map[string]string{"topic": "x"})
		is.NoErr(err)
		srv := serve(t, st, console.Options{})

		for path, want := range map[string][]string{
			"/ui/":                                    {"ok", "runs"},
			"/ui/runs":                                {parent.ID, kid.ID, "agent-7", "join 0/1 done", "pr=42"},
			"/ui/runs?status=running":                 {kid.ID},
			"/ui/runs?name=secur":                     {kid.ID},
			"/ui/runs?tag=pr%3D42":                    {parent.ID},
			"/ui/runs/" + kid.ID:                      {`id="ancestors"`, "review-pr", "sql injection", "agent-7", "workflow.checkpoint", "Release claim"},
			"/ui/runs/" + parent.ID:                   {kid.ID, "0/1 finished"},
			"/ui/leases":                              {"repo/main", "merger"},
			"/ui/keys?prefix=plan%2F":                 {"plan/42", "planner"},
			"/ui/key?k=" + url.QueryEscape("plan/42"): {"kv.set", "Delete key"},
			"/ui/sessions":                            {"chat-1", "topic"},
			"/ui/events":                              {"workflow.claim", "agent-7 claimed"},
		} {
			code, body := get(t, srv.URL+path)
			if code != 200 {
				t.Fatalf("%s: status %d: %s", path, code, body)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("%s does not show %q", path, w)
				}
			}
		}
		code, body := get(t, srv.URL+"/ui/runs?status=running")
		is.Equal(code, 200)
		is.True(!strings.Contains(body, `data-id="`+parent.ID)) // filtered out
		_, body = get(t, srv.URL+"/ui/runs?claimable=1")
		is.True(!strings.Contains(body, `data-id="`+kid.ID)) // held: not claimable
		is.True(strings.Contains(body, "No runs match"))
		code, _ = get(t, srv.URL+"/ui/runs/wf-000000000000")
		is.Equal(code, 404)
	})
}

// TestActionsFollowTheCallersScopes shows a reader no action, a writer the
// key's deletion but not the run's release, and refuses what it may not do.
func TestActionsFollowTheCallersScopes(t *testing.T) {
	is := is.New(t)
	ctx := context.Background()
	st := storetest.Open(t, storetest.New(t, "memory").URL, &state.Options{SweepInterval: -1})
	run, err := st.CreateRun(ctx, "r", nil)
	is.NoErr(err)
	_, err = st.ClaimRun(ctx, run.ID, "agent-1")
	is.NoErr(err)
	_, err = st.Set(ctx, "k", 1)
	is.NoErr(err)
	var mu sync.Mutex // the server's goroutines read what the test grants
	var granted []console.Scope
	grant := func(s ...console.Scope) { mu.Lock(); granted = s; mu.Unlock() }
	srv := serve(t, st, console.Options{Authorize: func(r *http.Request, need console.Scope) error {
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(granted, need) {
			return nil
		}
		return console.ErrForbidden
	}})
	grant(console.ScopeRead)
	_, body := get(t, srv.URL+"/ui/runs/"+run.ID)
	is.True(!strings.Contains(body, "Release claim"))
	_, body = get(t, srv.URL+"/ui/key?k=k")
	is.True(!strings.Contains(body, "Delete key"))
	code, _ := get(t, srv.URL+"/ui/confirm/delete?key=k")
	is.Equal(code, http.StatusForbidden)

	grant(console.ScopeRead, console.ScopeWrite)
	_, body = get(t, srv.URL+"/ui/key?k=k")
	is.True(strings.Contains(body, "Delete key"))
	_, body = get(t, srv.URL+"/ui/runs/"+run.ID)
	is.True(!strings.Contains(body, "Release claim"))
	res, err := http.PostForm(srv.URL+"/ui/act/release", url.Values{"run": {run.ID}, "agent": {"agent-1"}})
	is.NoErr(err)
	res.Body.Close()
	is.Equal(res.StatusCode, http.StatusForbidden)
	got, err := st.GetRun(ctx, run.ID)
	is.NoErr(err)
	is.Equal(got.AgentID, "agent-1") // still held

	grant(console.ScopeRead, console.ScopeWrite, console.ScopeAdmin)
	_, body = get(t, srv.URL+"/ui/runs/"+run.ID)
	is.True(strings.Contains(body, "Release claim"))

	grant()
	code, _ = get(t, srv.URL+"/ui/runs")
	is.Equal(code, http.StatusForbidden)
}
