package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/mcptasks"
)

// Page sizes. The name filter of the runs page reads at most nameScan runs
// per page of matches, so that a rare name costs a bounded read too.
const (
	pageSize = 50
	nameScan = 1000
	maxDepth = 10 // ancestors shown on a run's page
)

// overview is the health and counts page.
func (c *Console) overview(r *http.Request, st *state.Store, v *view) (string, error) {
	h, err := st.Health(r.Context())
	if err != nil && h.Status == "" {
		return "", err
	}
	v.Title, v.Nav = "Health", "health"
	type count struct {
		Status state.Status
		N      int64
	}
	var byStatus []count
	for _, s := range state.Statuses {
		byStatus = append(byStatus, count{s, h.RunsByStatus[s]})
	}
	v.Data = struct {
		H        state.Health
		ByStatus []count
		Waiting  int
		Err      string
	}{h, byStatus, st.Waiting(), errString(err)}
	return "overview", nil
}

// A runRow is a run in a listing, with its join progress when it joins
// children.
type runRow struct {
	state.Run
	Done, Total int64
}

// runs lists runs, newest first, filtered by status, tag, parent and name.
func (c *Console) runs(r *http.Request, st *state.Store, v *view) (string, error) {
	q := r.URL.Query()
	rq := state.RunQuery{Status: state.Status(q.Get("status")), ParentID: q.Get("parent"), Cursor: q.Get("cursor"), Limit: pageSize,
		Claimable: q.Get("claimable") != ""}
	tag := strings.TrimSpace(q.Get("tag"))
	if tag != "" {
		k, val, ok := strings.Cut(tag, "=")
		if !ok || k == "" {
			return "", fmt.Errorf("%w: tag: write it as key=value; got %q", errBadRequest, tag)
		}
		rq.Tags = map[string]string{k: val}
	}
	name := strings.TrimSpace(q.Get("name"))
	var rows []runRow
	next, scanned := "", 0
	if name == "" {
		p, err := st.DiscoverRuns(r.Context(), rq)
		if err != nil {
			return "", err
		}
		for _, run := range p.Runs {
			rows = append(rows, runRow{Run: run})
		}
		next = p.NextCursor
	} else {
		// Names are not indexed: read pages of the chosen index, keeping
		// the matches, up to nameScan runs; the cursor continues there.
		rq.Limit = 200
		for scanned < nameScan && len(rows) < pageSize {
			p, err := st.DiscoverRuns(r.Context(), rq)
			if err != nil {
				return "", err
			}
			scanned += len(p.Runs)
			for _, run := range p.Runs {
				if strings.Contains(run.Name, name) {
					rows = append(rows, runRow{Run: run})
				}
			}
			next = p.NextCursor
			if next == "" {
				break
			}
			rq.Cursor = next
		}
	}
	for i := range rows {
		if !rows[i].Join {
			continue
		}
		full, err := st.GetRun(r.Context(), rows[i].ID)
		if err != nil {
			continue // finished and swept meanwhile
		}
		rows[i].Done, rows[i].Total = joinProgress(full.Children)
	}
	v.Title, v.Nav = "Runs", "runs"
	v.Data = struct {
		Status, Tag, Name, Parent string
		Claimable                 bool
		Statuses                  []state.Status
		Runs                      []runRow
		Next                      string
		Scanned                   int
	}{string(rq.Status), tag, name, rq.ParentID, rq.Claimable, state.Statuses, rows, next, scanned}
	return "runs", nil
}

// joinProgress counts a parent's finished children and all of them.
func joinProgress(children map[state.Status]int64) (done, total int64) {
	for s, n := range children {
		total += n
		if s.Finished() {
			done += n
		}
	}
	return done, total
}

// run shows one run: its claim, checkpoints, outputs, children and history.
func (c *Console) run(r *http.Request, st *state.Store, v *view) (string, error) {
	ctx := r.Context()
	id := r.PathValue("id")
	run, err := st.GetRun(ctx, id)
	if err != nil {
		return "", err
	}
	outs, err := st.ListOutputs(ctx, id, state.WithLimit(pageSize), state.WithCursor(r.URL.Query().Get("outputs")))
	if err != nil {
		return "", err
	}
	var kids state.RunPage
	if len(run.Children) > 0 {
		kids, err = st.DiscoverRuns(ctx, state.RunQuery{ParentID: id, Limit: pageSize, Cursor: r.URL.Query().Get("children")})
		if err != nil {
			return "", err
		}
	}
	hist, err := st.History(ctx, state.HistoryQuery{Key: id, Limit: pageSize})
	if err != nil {
		return "", err
	}
	// Its ancestors, root first: one point read each, at most maxDepth.
	var ancestors []state.Run
	for p := run.ParentID; p != "" && len(ancestors) < maxDepth; {
		a, err := st.GetRun(ctx, p)
		if err != nil {
			break // swept: the chain ends here
		}
		ancestors = append([]state.Run{a}, ancestors...)
		p = a.ParentID
	}
	done, total := joinProgress(run.Children)
	v.Title, v.Nav = "Run "+id, "runs"
	v.Data = struct {
		Run         state.Run
		Ancestors   []state.Run
		Outputs     state.OutputPage
		Children    state.RunPage
		Done, Total int64
		History     []state.Event
		Live        bool
	}{run, ancestors, outs, kids, done, total, hist, run.AgentID != "" && run.ClaimExpiresAt.After(c.o.Now())}
	return "run", nil
}

// leases lists the live leases under a prefix.
func (c *Console) leases(r *http.Request, st *state.Store, v *view) (string, error) {
	q := r.URL.Query()
	p, err := st.ListLeases(r.Context(), q.Get("prefix"), state.WithLimit(pageSize), state.WithCursor(q.Get("cursor")))
	if err != nil {
		return "", err
	}
	v.Title, v.Nav = "Leases", "leases"
	v.Data = struct {
		Prefix string
		Page   state.LeasePage
	}{q.Get("prefix"), p}
	return "leases", nil
}

// A crumb is one step of the key prefix browser.
type crumb struct{ Label, Prefix string }

// crumbs splits a prefix at its slashes.
func crumbs(prefix string) []crumb {
	out := []crumb{{Label: "(all keys)", Prefix: ""}}
	at := 0
	for {
		i := strings.IndexByte(prefix[at:], '/')
		if i < 0 {
			break
		}
		out = append(out, crumb{Label: prefix[at : at+i+1], Prefix: prefix[:at+i+1]})
		at += i + 1
	}
	if at < len(prefix) {
		out = append(out, crumb{Label: prefix[at:], Prefix: prefix})
	}
	return out
}

// keys lists a page of keys under a prefix with their values.
func (c *Console) keys(r *http.Request, st *state.Store, v *view) (string, error) {
	q := r.URL.Query()
	prefix := q.Get("prefix")
	p, err := st.List(r.Context(), prefix, state.WithLimit(pageSize), state.WithCursor(q.Get("cursor")))
	if err != nil {
		return "", err
	}
	entries := []state.Entry{}
	if len(p.Keys) > 0 {
		if entries, err = st.GetMany(r.Context(), p.Keys); err != nil {
			return "", err
		}
		entries = slices.DeleteFunc(entries, func(e state.Entry) bool { return !e.Found() })
	}
	v.Title, v.Nav = "Keys", "keys"
	v.Data = struct {
		Prefix  string
		Crumbs  []crumb
		Entries []state.Entry
		Next    string
	}{prefix, crumbs(prefix), entries, p.NextCursor}
	return "keys", nil
}

// key shows one key, its value and its recent versions.
func (c *Console) key(r *http.Request, st *state.Store, v *view) (string, error) {
	k := r.URL.Query().Get("k")
	if k == "" {
		return "", fmt.Errorf("%w: k: the key is missing", errBadRequest)
	}
	e, err := st.Get(r.Context(), k)
	found := err == nil
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return "", err
	}
	hist, err := st.History(r.Context(), state.HistoryQuery{Key: k, Limit: pageSize})
	if err != nil {
		return "", err
	}
	v.Title, v.Nav = "Key "+k, "keys"
	v.Data = struct {
		Key     string
		Found   bool
		Entry   state.Entry
		History []state.Event
	}{k, found, e, hist}
	return "key", nil
}

// sessions lists the live sessions under a prefix.
func (c *Console) sessions(r *http.Request, st *state.Store, v *view) (string, error) {
	q := r.URL.Query()
	p, err := st.ListSessions(r.Context(), q.Get("prefix"), state.WithLimit(pageSize), state.WithCursor(q.Get("cursor")))
	if err != nil {
		return "", err
	}
	v.Title, v.Nav = "Sessions", "sessions"
	v.Data = struct {
		Prefix string
		Page   state.SessionPage
	}{q.Get("prefix"), p}
	return "sessions", nil
}

// taskOwner is the owner of a request's tasks.
func (c *Console) taskOwner(r *http.Request, st *state.Store) (mcptasks.Owner, error) {
	if c.o.TaskOwner != nil {
		return c.o.TaskOwner(r)
	}
	return mcptasks.Owner{Namespace: st.NamespaceName()}, nil
}

// tasks lists the caller's MCP tasks.
func (c *Console) tasks(r *http.Request, st *state.Store, v *view) (string, error) {
	v.Title, v.Nav = "Tasks", "tasks"
	if c.o.Tasks == nil {
		v.Data = struct{ Off bool }{true}
		return "tasks", nil
	}
	owner, err := c.taskOwner(r, st)
	if err != nil {
		return "", err
	}
	ts, next, err := c.o.Tasks.List(r.Context(), owner, r.URL.Query().Get("cursor"))
	if err != nil {
		return "", err
	}
	v.Data = struct {
		Off   bool
		Tasks []mcptasks.Task
		Next  string
	}{false, ts, next}
	return "tasks", nil
}

// events shows the newest history events; the page's script then follows
// the change feed (stream).
func (c *Console) events(r *http.Request, st *state.Store, v *view) (string, error) {
	prefix := r.URL.Query().Get("prefix")
	evs, err := st.History(r.Context(), state.HistoryQuery{Limit: pageSize})
	if err != nil {
		return "", err
	}
	var after int64
	if len(evs) > 0 {
		after = evs[0].ID
	}
	evs = slices.DeleteFunc(evs, func(e state.Event) bool { return !strings.HasPrefix(e.Key, prefix) })
	v.Title, v.Nav = "Events", "events"
	v.Data = struct {
		Prefix string
		After  int64
		Events []state.Event
	}{prefix, after, evs}
	return "events", nil
}

// An action is what a confirmation page asks about.
type action struct {
	Name     string
	Question string
	Detail   string
	Fields   map[string]string
	Back     string
}

// describe validates an action's fields and phrases its question.
func (c *Console) describe(r *http.Request, st *state.Store, name string, form url.Values) (action, error) {
	a := action{Name: name, Fields: map[string]string{}}
	ctx := r.Context()
	switch name {
	case "release", "fail":
		id := form.Get("run")
		run, err := st.GetRun(ctx, id)
		if err != nil {
			return a, err
		}
		a.Fields["run"], a.Back = id, c.o.Base+"/runs/"+url.PathEscape(id)
		if name == "release" {
			if run.AgentID == "" {
				return a, fmt.Errorf("%w: run %s has no claim to release", state.ErrNotHeld, id)
			}
			a.Fields["agent"] = run.AgentID
			a.Question = fmt.Sprintf("Release %s's claim on run %s?", run.AgentID, id)
			a.Detail = "Another agent may then claim the run at once and resume it from its last checkpoint (step " +
				strconv.FormatInt(run.LastStep, 10) + "). The holder's next fenced write will be refused."
		} else {
			if run.Status.Finished() {
				return a, fmt.Errorf("%w: run %s is %s already", state.ErrFinished, id, run.Status)
			}
			a.Question = fmt.Sprintf("Fail run %s (%s)?", id, run.Name)
			a.Detail = "The run becomes failed: nobody can claim or checkpoint it again."
		}
	case "delete":
		k := form.Get("key")
		e, err := st.Get(ctx, k)
		if err != nil {
			return a, err
		}
		a.Fields["key"], a.Fields["version"] = k, strconv.FormatInt(e.Version, 10)
		a.Back = c.o.Base + "/key?k=" + url.QueryEscape(k)
		a.Question = fmt.Sprintf("Delete key %s?", k)
		a.Detail = "Version " + strconv.FormatInt(e.Version, 10) + " is deleted; if the key changes before you confirm, nothing is deleted."
	case "cancel":
		if c.o.Tasks == nil {
			return a, fmt.Errorf("%w: tasks are off", errBadRequest)
		}
		owner, err := c.taskOwner(r, st)
		if err != nil {
			return a, err
		}
		id := form.Get("task")
		t, err := c.o.Tasks.Get(ctx, owner, id)
		if err != nil {
			return a, err
		}
		a.Fields["task"], a.Back = id, c.o.Base+"/tasks"
		a.Question = fmt.Sprintf("Cancel task %s (%s, %s)?", id, t.Tool, t.Status)
		a.Detail = "Its client will see the task cancelled."
	default:
		return a, fmt.Errorf("%w: no action %q", state.ErrNotFound, name)
	}
	return a, nil
}

// confirm asks for the confirmation of an action.
func (c *Console) confirm(r *http.Request, st *state.Store, v *view) (string, error) {
	name := r.PathValue("action")
	if err := c.authorize(r, actionScope[name]); err != nil {
		return "", err
	}
	a, err := c.describe(r, st, name, r.URL.Query())
	if err != nil {
		return "", err
	}
	v.Title, v.Nav, v.Data = "Confirm", "", a
	return "confirm", nil
}

// act takes a confirmed action and sends the browser back with a message.
func (c *Console) act(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) { http.Error(w, msg, code) }
	if !sameOrigin(r) {
		fail(http.StatusForbidden, "403 forbidden: the request did not come from the console's own page")
		return
	}
	name := r.PathValue("action")
	scope, ok := actionScope[name]
	if !ok {
		fail(http.StatusNotFound, "404: no action "+strconv.Quote(name))
		return
	}
	if err := c.authorize(r, scope); err != nil {
		fail(http.StatusForbidden, "403 forbidden: "+err.Error())
		return
	}
	st, err := c.store(r)
	if err != nil {
		fail(http.StatusBadRequest, err.Error())
		return
	}
	if err := r.ParseForm(); err != nil {
		fail(http.StatusBadRequest, "form: "+err.Error())
		return
	}
	ctx := r.Context()
	var msg, back string
	switch name {
	case "release":
		id := r.PostForm.Get("run")
		_, err = st.ReleaseRun(ctx, id, r.PostForm.Get("agent"))
		msg, back = "Released the claim on "+id, c.o.Base+"/runs/"+url.PathEscape(id)
	case "fail":
		id := r.PostForm.Get("run")
		_, err = st.FailRun(ctx, id)
		msg, back = "Failed run "+id, c.o.Base+"/runs/"+url.PathEscape(id)
	case "delete":
		k := r.PostForm.Get("key")
		ver, perr := strconv.ParseInt(r.PostForm.Get("version"), 10, 64)
		if perr != nil {
			fail(http.StatusBadRequest, "version: "+perr.Error())
			return
		}
		var deleted bool
		deleted, err = st.Delete(ctx, k, state.IfVersion(ver), state.WithAgent("console"))
		if err == nil && !deleted {
			err = fmt.Errorf("%w: key %s was gone already", state.ErrNotFound, k)
		}
		msg, back = "Deleted key "+k, c.o.Base+"/keys?prefix="+url.QueryEscape(parentPrefix(k))
	case "cancel":
		id := r.PostForm.Get("task")
		var owner mcptasks.Owner
		if c.o.Tasks == nil {
			err = fmt.Errorf("%w: tasks are off", errBadRequest)
		} else if owner, err = c.taskOwner(r, st); err == nil {
			_, err = c.o.Tasks.Cancel(ctx, owner, id)
		}
		msg, back = "Cancelled task "+id, c.o.Base+"/tasks"
	}
	if err != nil {
		c.o.Logger.Warn("console action", "action", name, "err", err)
		http.Error(w, name+": "+err.Error(), statusOf(err))
		return
	}
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"flash="+url.QueryEscape(msg), http.StatusSeeOther)
}

// parentPrefix is the prefix of the key's folder ("a/b/" of "a/b/c").
func parentPrefix(k string) string {
	if i := strings.LastIndexByte(k, '/'); i >= 0 {
		return k[:i+1]
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// An eventView is an event as the page and the stream show it.
type eventView struct {
	ID      int64           `json:"id"`
	Key     string          `json:"key"`
	Op      string          `json:"op"`
	Agent   string          `json:"agent,omitempty"`
	TimeMs  int64           `json:"time_ms"`
	Value   json.RawMessage `json:"value,omitempty"`
	Prev    json.RawMessage `json:"prev,omitempty"`
	Summary string          `json:"summary"`
}

// viewOf summarises an event in words.
func viewOf(e state.Event) eventView {
	return eventView{ID: e.ID, Key: e.Key, Op: e.Op, Agent: e.AgentID, TimeMs: e.Time.UnixMilli(),
		Value: e.Value, Prev: e.Prev, Summary: summary(e)}
}

// summary says what an event did, in a few words.
func summary(e state.Event) string {
	who := e.AgentID
	if who == "" {
		who = "someone"
	}
	var v struct {
		Status  string `json:"status"`
		Attempt int64  `json:"attempt"`
		Step    *int64 `json:"step"`
	}
	_ = json.Unmarshal(e.Value, &v)
	switch e.Op {
	case "workflow.claim":
		return fmt.Sprintf("%s claimed %s (attempt %d)", who, e.Key, v.Attempt)
	case "workflow.reclaim":
		return fmt.Sprintf("%s took over %s (attempt %d)", who, e.Key, v.Attempt)
	case "workflow.heartbeat":
		return fmt.Sprintf("heartbeat: %s still holds %s", who, e.Key)
	case "workflow.checkpoint":
		if v.Step != nil {
			return fmt.Sprintf("%s checkpointed %s at step %d", who, e.Key, *v.Step)
		}
	case "workflow.create":
		return fmt.Sprintf("%s created run %s", who, e.Key)
	case "workflow.finish":
		return fmt.Sprintf("run %s finished: %s", e.Key, v.Status)
	case "workflow.release":
		return fmt.Sprintf("the claim on %s was released", e.Key)
	case "kv.set":
		return fmt.Sprintf("%s set %s", who, e.Key)
	case "kv.delete":
		return fmt.Sprintf("%s deleted %s", who, e.Key)
	case "session.save":
		return fmt.Sprintf("%s saved session %s", who, e.Key)
	case "session.delete":
		return fmt.Sprintf("%s deleted session %s", who, e.Key)
	case "lease.acquire":
		return fmt.Sprintf("%s acquired lease %s", who, e.Key)
	case "lease.renew":
		return fmt.Sprintf("heartbeat: %s renewed lease %s", who, e.Key)
	case "lease.release":
		return fmt.Sprintf("%s released lease %s", who, e.Key)
	}
	if v.Status != "" {
		return fmt.Sprintf("%s: %s is %s", e.Op, e.Key, v.Status)
	}
	return e.Key
}

// funcs are the templates' functions.
var funcs = map[string]any{
	"short":   short,
	"ms":      func(t time.Time) int64 { return t.UnixMilli() },
	"stamp":   func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"clip":    clip,
	"pretty":  pretty,
	"summary": summary,
	"dur":     func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"zero":    func(t time.Time) bool { return t.IsZero() },
	"crumbs":  crumbs,
	"dict":    dict,
	"link":    link,
}

// link is the console page of an event's record, relative to the base:
// the run, the key, or the leases or sessions under its name.
func link(op, key string) string {
	kind, _, _ := strings.Cut(op, ".")
	switch kind {
	case "workflow":
		return "/runs/" + url.PathEscape(key)
	case "kv":
		return "/key?k=" + url.QueryEscape(key)
	case "lease":
		return "/leases?prefix=" + url.QueryEscape(key)
	case "session":
		return "/sessions?prefix=" + url.QueryEscape(key)
	}
	return ""
}

// dict builds a map for a sub-template from key, value pairs.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, errors.New("dict: keys must be strings")
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// short displays a large number (a Redis revision is 16 digits) as its
// last six digits, which tell neighbouring versions and fences apart; the
// page shows the whole number on hover.
func short(n int64) string {
	s := strconv.FormatInt(n, 10)
	if len(s) <= 7 {
		return s
	}
	return "…" + s[len(s)-6:]
}

// clip shortens a JSON value for a table cell.
func clip(b []byte) string {
	const max = 120
	s := string(b)
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

// pretty indents a JSON value.
func pretty(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(b)
	}
	return string(out)
}

// Left says how long until t, from the page's time: "12s", "3m04s", or
// "expired 5s ago". The page's script keeps it counting.
func (v *view) Left(t time.Time) string {
	d := t.Sub(time.UnixMilli(v.NowMs))
	if d <= 0 {
		return "expired " + human(-d) + " ago"
	}
	return human(d)
}

// Ago says how long before the page's time t was: "4s ago".
func (v *view) Ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.UnixMilli(v.NowMs).Sub(t)
	if d < 0 {
		return "in " + human(-d)
	}
	return human(d) + " ago"
}

// human writes a duration the way a person reads it at a glance.
func human(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}
