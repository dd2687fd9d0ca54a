package uitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/sidecar"
)

// seed fills a store with what an operator looks at: a join parent with two
// children, one held by agent-7 with two checkpoints, a key, a lease and a
// session.
type seeded struct {
	parent, held, open state.Run
}

func seed(t *testing.T, st *state.Store) seeded {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var s seeded
	var err error
	s.parent, err = st.CreateRun(ctx, "review-pr-42", map[string]string{"pr": "42"}, state.WithJoin())
	must(err)
	s.held, err = st.CreateRun(ctx, "security-review", map[string]string{"pr": "42"}, state.WithParent(s.parent.ID))
	must(err)
	s.open, err = st.CreateRun(ctx, "style-review", map[string]string{"pr": "42"}, state.WithParent(s.parent.ID))
	must(err)
	_, err = st.ClaimRun(ctx, s.held.ID, "agent-7", state.WithClaimTTL(10*time.Minute))
	must(err)
	for step := int64(1); step <= 2; step++ {
		_, err = st.CheckpointRun(ctx, s.held.ID, step, map[string]any{"finding": fmt.Sprintf("finding %d: unchecked input", step)},
			state.WithAgent("agent-7"))
		must(err)
	}
	_, err = st.Set(ctx, "plan/pr-42/summary", map[string]string{"verdict": "needs work"}, state.WithAgent("planner"))
	must(err)
	_, err = st.TryAcquireLease(ctx, "repo/main", "merger", 10*time.Minute)
	must(err)
	_, err = st.SetSession(ctx, "chat-1", map[string]any{"topic": "pr 42", "turns": 3}, state.WithAgent("agent-7"))
	must(err)
	return s
}

// TestConsoleRunsClaimsAndActions walks the runs pages as an operator does:
// health and counts, the runs with a claim counting down and a join's
// progress, a filter, one run's checkpoints and history, then releasing the
// stuck claim and failing a run, each behind a confirmation, with the
// notice dismissed.
func TestConsoleRunsClaimsAndActions(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		p := newPage(t)
		srv := startSidecar(t, backend)
		s := seed(t, srv.Store)

		p.open(srv.URL + "/ui/")
		p.seenText("#health-status", "ok")
		p.seenText("#count-runs", "3")
		p.seenText("#count-leases", "1")

		p.click(`header nav a[href="/ui/runs"]`)
		row := fmt.Sprintf(`#runs tr[data-id=%q]`, s.held.ID)
		p.seenText(row, "agent-7")
		p.seenText(row+" .countdown", "m")
		first := p.text(row + " .countdown")
		p.wait("the claim's countdown moves", fmt.Sprintf(`document.querySelector(%q).innerText !== %q`, row+" .countdown", first))
		p.seenText(fmt.Sprintf(`#runs tr[data-id=%q]`, s.parent.ID), "join 0/2 done")
		p.screenshot("runs")
		if os.Getenv("UITEST_DOCS") != "" && backend == "sqlite" {
			png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
			if err == nil {
				err = os.WriteFile(filepath.Join("..", "docs", "console.png"), png, 0o644)
			}
			if err != nil {
				t.Errorf("docs/console.png: %v", err)
			}
		}

		// Filter by status: only the running child is left.
		p.do("choosing running", chromedp.SetValue(chromedp.CSS(`select[name=status]`), "running"))
		p.click(`.filters button`)
		p.seenText(row, "agent-7")
		p.unseen(fmt.Sprintf(`#runs tr[data-id=%q]`, s.parent.ID))

		// One run: its claim, checkpoints and history.
		p.click(row + " td a")
		p.seenText("#run-agent", "agent-7")
		p.seenText("#ancestors", "review-pr-42") // its family: the parent above it
		p.seenText("#outputs", "finding 2")
		p.seenText("#history", "checkpointed")
		p.unseen("#outputs pre") // the JSON is collapsed until clicked
		p.click("#outputs tr:first-child summary")
		p.seen("#outputs pre")

		// Release the stuck claim, confirming first.
		p.click("#act-release")
		p.seenText("#confirm", "Release agent-7's claim")
		p.click("#confirm-yes")
		p.seenText("#flash", "Released the claim")
		p.seenText("#run-agent", "—")
		p.click("#flash .dismiss")
		p.unseen("#flash")

		// A change made elsewhere is announced on the open page, and a
		// reload shows it.
		p.seesNothingNew()
		if _, err := srv.Store.CheckpointRun(context.Background(), s.held.ID, 3, map[string]string{"finding": "finding 3: from elsewhere"}); err != nil {
			t.Fatal(err)
		}
		p.seenText("#changes", "1 change since this page was read")
		p.click("#changes-reload")
		p.seenText("#outputs", "finding 3")
		p.unseen("#changes")
		p.unseen("#flash") // the release's notice is not repeated by the reload

		// Released, the run is claimable: the filter of stuck runs finds it.
		p.open(srv.URL + "/ui/runs")
		p.click(`input[name=claimable]`)
		p.click(`.filters button`)
		p.seenText(row, "running")
		p.unseen(fmt.Sprintf(`#runs tr[data-id=%q]`, s.parent.ID)) // waiting for its children

		// Fail the other child; the parent's join counts it.
		p.open(srv.URL + "/ui/runs/" + s.open.ID)
		p.click("#act-fail")
		p.seenText("#confirm", "Fail run")
		p.click("#confirm-no")
		p.seenText("#run-status", "created") // cancelled: nothing changed
		p.click("#act-fail")
		p.click("#confirm-yes")
		p.seenText("#run-status", "failed")
		p.unseen("#act-fail")
		p.open(srv.URL + "/ui/runs/" + s.parent.ID)
		p.seenText("#join-progress", "1/2 finished")
		p.seenText("#children", s.held.ID)
		p.screenshot("parent")
	})
}

// TestConsoleKeysLeasesSessions browses keys by prefix, reads a value and
// its versions, deletes it behind a confirmation, and sees the lease and the
// session.
func TestConsoleKeysLeasesSessions(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		p := newPage(t)
		srv := startSidecar(t, backend)
		seed(t, srv.Store)
		if _, err := srv.Store.Set(context.Background(), "plan/pr-42/summary", map[string]string{"verdict": "approve"},
			state.WithAgent("planner-2"), state.WithTTL(time.Hour)); err != nil {
			t.Fatal(err)
		}

		p.open(srv.URL + "/ui/keys")
		p.seenText("#keys", "plan/pr-42/summary")
		p.click(`#keys a`)
		p.seenText("#value", "approve")
		p.seenText("#entry", "planner-2")
		p.seenText("#history", "kv.set")
		p.click(".crumbs a:nth-child(2)")
		p.seenText("#crumbs", "plan/")
		p.seenText("#keys", "plan/pr-42/summary")
		p.click(`#keys a`)
		p.click("#act-delete")
		p.seenText("#confirm", "Delete key plan/pr-42/summary")
		p.click("#confirm-yes")
		p.seenText("#flash", "Deleted key")
		p.seenText("#keys", "No keys")

		p.open(srv.URL + "/ui/leases")
		p.seenText("#leases", "repo/main")
		p.seenText("#leases", "merger")
		p.seen("#leases .countdown")

		p.open(srv.URL + "/ui/sessions")
		p.seenText("#sessions", "chat-1")
		p.unseen("#sessions pre")
		p.click("#sessions summary")
		p.seenText("#sessions pre", "turns")
		p.screenshot("sessions")
	})
}

// TestConsoleLiveEvents follows the change feed: writes appear on the open
// page without a reload, heartbeats can be hidden.
func TestConsoleLiveEvents(t *testing.T) {
	backends(t, func(t *testing.T, backend string) {
		p := newPage(t)
		srv := startSidecar(t, backend)
		s := seed(t, srv.Store)
		ctx := context.Background()

		p.open(srv.URL + "/ui/events")
		p.seenText("#live-state", "live")
		p.seenText("#history", "agent-7 claimed")

		if _, err := srv.Store.Set(ctx, "live/one", 1, state.WithAgent("writer-9")); err != nil {
			t.Fatal(err)
		}
		p.seenText("#history li.fresh", "live/one")
		p.click("#history li.fresh a.open") // the key's page, from the live event
		p.seenText("#entry", "writer-9")
		p.do("going back", chromedp.NavigateBack())
		p.seenText("#live-state", "live")
		if _, err := srv.Store.ClaimRun(ctx, s.held.ID, "agent-7"); err != nil { // a heartbeat
			t.Fatal(err)
		}
		p.seenText("#history li.beat", "heartbeat")
		p.click("#hide-beats")
		p.unseen("#history li.beat")
		p.seenText("#history", "live/one")
		p.screenshot("events")
	})
}

// TestConsoleSignInShowsTheTokensNamespace signs in through the form with a
// bearer token, as a person does, and sees its namespace's runs only.
func TestConsoleSignInShowsTheTokensNamespace(t *testing.T) {
	p := newPage(t)
	srv := startSidecar(t, "sqlite", sidecar.Token{Secret: "alpha-secret", Namespace: "team-a"},
		sidecar.Token{Secret: "beta-secret", Namespace: "team-b"})
	ctx := context.Background()
	a, _ := srv.Store.Namespace("team-a")
	b, _ := srv.Store.Namespace("team-b")
	ra, err := a.CreateRun(ctx, "alpha-run", nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.CreateRun(ctx, "beta-run", nil)
	if err != nil {
		t.Fatal(err)
	}

	p.open(srv.URL + "/ui/runs")
	p.seen("input[name=token]") // sent to the sign-in form
	p.do("typing a wrong token", chromedp.SendKeys(chromedp.CSS("input[name=token]"), "wrong"))
	p.click("#login")
	p.seenText("#login-error", "not valid")
	p.do("typing the token", chromedp.SendKeys(chromedp.CSS("input[name=token]"), "alpha-secret"))
	p.click("#login")
	p.seenText("header .where", "team-a")
	p.click(`header nav a[href="/ui/runs"]`)
	p.seenText("#runs", ra.ID)
	if strings.Contains(p.text("#runs"), rb.ID) {
		t.Errorf("team-a's console lists team-b's run %s", rb.ID)
	}
	p.screenshot("signed-in")
}
