package mcptasks

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/storetest"
)

// TestTaskStore checks the task store's rules on every backend (memory and
// SQLite always; Redis and PostgreSQL when STATE_TEST_REDIS_URL and
// STATE_TEST_POSTGRES_URL are set), through two stores opened on the same
// location where the backend is shared, as two replicas see it.
func TestTaskStore(t *testing.T) {
	cases := []struct {
		name string
		f    func(*testing.T, storetest.Backend)
	}{
		{"durable before the reply", testDurable},
		{"owner isolation", testOwners},
		{"fenced and recorded once", testFence},
		{"cancel", testCancelStore},
		{"live limit", testLiveLimit},
		{"racing creations", testRacingCreates},
		{"input answers", testAnswers},
		{"racing results", testRacingResults},
		{"expiry by retention", testExpiry},
	}
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { c.f(t, storetest.New(t, b.Name)) })
		}
	})
}

// pair opens the location twice (once for memory, which lives in one
// process: its two handles share it) and gives each a Tasks that takes
// nothing over, so that the test drives every write itself.
func pair(t *testing.T, b storetest.Backend, o *Options) (*Tasks, *Tasks) {
	t.Helper()
	mk := func(st *state.Store) *Tasks {
		srv := newMCPServer()
		opts := Options{SweepInterval: -1}
		if o != nil {
			opts = *o
			opts.SweepInterval = -1
		}
		ts, err := New(st, srv, &opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ts.Close(context.Background()) })
		return ts
	}
	a := openStore(t, b)
	other := a
	if b.Shared {
		other = openStore(t, b)
	}
	return mk(a), mk(other)
}

var alice, bob = Owner{Namespace: "ns", Principal: "alice"}, Owner{Namespace: "ns", Principal: "bob"}

// mustCreate creates a task of alice's.
func mustCreate(t *testing.T, ts *Tasks, owner Owner, ttl time.Duration) *record {
	t.Helper()
	rec, err := ts.create(context.Background(), owner, "", "echo", json.RawMessage(`{"name":"echo","arguments":{"text":"x"}}`), ttl)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return rec
}

func testDurable(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	for range 20 {
		rec := mustCreate(t, a, alice, time.Hour)
		// The other replica resolves it as soon as create returned.
		got, _, err := other.get(ctx, alice, rec.ID)
		if err != nil {
			t.Fatalf("a task created on one replica must be readable on another at once: %v", err)
		}
		if got.Status != StatusWorking || got.Tool != "echo" || got.Run == "" {
			t.Fatalf("got %+v", got)
		}
		run, err := other.st.GetRun(ctx, got.Run)
		if err != nil || run.Name != rec.ID {
			t.Fatalf("the task's run must exist when create returns, named by the task: %v %+v", err, run)
		}
	}
}

func testOwners(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, time.Hour)
	if _, _, err := other.get(ctx, bob, rec.ID); !errors.Is(err, errNoTask) {
		t.Fatalf("another owner's get: %v, want errNoTask", err)
	}
	if _, _, err := other.get(ctx, Owner{Namespace: "other", Principal: "alice"}, rec.ID); !errors.Is(err, errNoTask) {
		t.Fatalf("the same principal in another namespace: %v, want errNoTask", err)
	}
	if _, err := other.cancel(ctx, bob, rec.ID); !errors.Is(err, errNoTask) {
		t.Fatalf("another owner's cancel: %v, want errNoTask", err)
	}
	if err := other.answer(ctx, bob, rec.ID, map[string]json.RawMessage{"x": json.RawMessage(`1`)}); !errors.Is(err, errNoTask) {
		t.Fatalf("another owner's update: %v, want errNoTask", err)
	}
	recs, _, err := other.list(ctx, bob, "", 50)
	if err != nil || len(recs) != 0 {
		t.Fatalf("another owner's list: %d tasks, %v; want none", len(recs), err)
	}
	recs, _, err = other.list(ctx, alice, "", 50)
	if err != nil || len(recs) != 1 || recs[0].ID != rec.ID {
		t.Fatalf("the owner's list: %v, %v", recs, err)
	}
	// Unknown and malformed ids look the same as foreign ones.
	for _, id := range []string{newID(), "", "x", rec.ID + "a", "../" + rec.ID} {
		if _, _, err := other.get(ctx, alice, id); !errors.Is(err, errNoTask) {
			t.Fatalf("get %q: %v, want errNoTask", id, err)
		}
	}
	// Listing pages, newest first, and only the owner's.
	var want []string
	for range 7 {
		want = append([]string{mustCreate(t, a, alice, time.Hour).ID}, want...)
		mustCreate(t, a, bob, time.Hour)
	}
	want = append(want, rec.ID)
	var got []string
	cursor := ""
	for {
		recs, next, err := other.list(ctx, alice, cursor, 3)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			got = append(got, r.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d tasks, want %d", len(got), len(want))
	}
	// Tasks created in the same millisecond may list in either order.
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	for _, id := range want {
		if !seen[id] {
			t.Fatalf("task %s not listed", id)
		}
	}
}

func testFence(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, time.Hour)
	// Worker 1 checkpoints; worker 2 (a takeover, greater fence) writes.
	if err := a.checkpoint(ctx, rec, 1, 1, "first"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.write(ctx, rec, 2, 2, false, func(*record) {}); err != nil {
		t.Fatal(err)
	}
	// Worker 1 is fenced out: no checkpoint, no result.
	if err := a.checkpoint(ctx, rec, 1, 1, "stale"); !errors.Is(err, errStale) {
		t.Fatalf("a stale worker's checkpoint: %v, want errStale", err)
	}
	if _, err := a.write(ctx, rec, 1, 1, true, func(r *record) { r.Status, r.Result = StatusCompleted, json.RawMessage(`{"stale":true}`) }); !errors.Is(err, errStale) {
		t.Fatalf("a stale worker's result: %v, want errStale", err)
	}
	cp, ok, err := other.lastCheckpoint(ctx, rec.ID)
	if err != nil || !ok || string(cp) != `"first"` {
		t.Fatalf("last checkpoint %s %v %v, want \"first\"", cp, ok, err)
	}
	// Worker 2 records the result; nothing overwrites it afterwards, not
	// even a worker with a greater fence.
	if _, err := other.write(ctx, rec, 2, 2, true, func(r *record) { r.Status, r.Result = StatusCompleted, json.RawMessage(`{"n":2}`) }); err != nil {
		t.Fatal(err)
	}
	if _, err := a.write(ctx, rec, 3, 3, true, func(r *record) { r.Status, r.Result = StatusCompleted, json.RawMessage(`{"n":3}`) }); !errors.Is(err, errFinished) {
		t.Fatalf("a second result: %v, want errFinished", err)
	}
	got, _, err := a.get(ctx, alice, rec.ID)
	if err != nil || string(got.Result) != `{"n":2}` || got.Attempt != 2 || got.Fence != 2 {
		t.Fatalf("recorded %+v %v", got, err)
	}
}

func testCancelStore(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, time.Hour)
	got, err := other.cancel(ctx, alice, rec.ID)
	if err != nil || got.Status != StatusCancelled {
		t.Fatalf("cancel: %+v %v", got, err)
	}
	// Cancelled is terminal: no result is recorded afterwards.
	if _, err := a.write(ctx, rec, 1, 1, true, func(r *record) { r.Status = StatusCompleted }); !errors.Is(err, errFinished) {
		t.Fatalf("a result after cancel: %v, want errFinished", err)
	}
	var te *terminalError
	if _, err := other.cancel(ctx, alice, rec.ID); !errors.As(err, &te) || te.status != StatusCancelled {
		t.Fatalf("second cancel: %v, want a terminalError", err)
	}
}

func testLiveLimit(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, &Options{MaxLive: 3})
	ctx := context.Background()
	var recs []*record
	for range 3 {
		recs = append(recs, mustCreate(t, a, alice, time.Hour))
	}
	if _, err := other.create(ctx, alice, "", "echo", json.RawMessage(`{}`), time.Hour); !errors.Is(err, errTooMany) {
		t.Fatalf("a fourth live task: %v, want errTooMany", err)
	}
	if n, err := other.Live(ctx, alice); err != nil || n != 3 {
		t.Fatalf("Live = %d, %v; want 3", n, err)
	}
	// Another owner has a count of its own.
	mustCreate(t, other, bob, time.Hour)
	// A finished task (completed or cancelled) no longer counts.
	if _, err := a.write(ctx, recs[0], 1, 1, true, func(r *record) { r.Status = StatusCompleted }); err != nil {
		t.Fatal(err)
	}
	if _, err := other.cancel(ctx, alice, recs[1].ID); err != nil {
		t.Fatal(err)
	}
	if n, err := a.Live(ctx, alice); err != nil || n != 1 {
		t.Fatalf("Live after two finished = %d, %v; want 1", n, err)
	}
	mustCreate(t, other, alice, time.Hour)
	mustCreate(t, other, alice, time.Hour)
	if _, err := other.create(ctx, alice, "", "echo", json.RawMessage(`{}`), time.Hour); !errors.Is(err, errTooMany) {
		t.Fatalf("over the limit again: %v, want errTooMany", err)
	}
	// The refused creations left no run behind that a sweep would start.
	page, err := a.st.DiscoverRuns(ctx, state.RunQuery{Claimable: true, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range page.Runs {
		if _, _, err := a.get(ctx, alice, r.Name); errors.Is(err, errNoTask) {
			if _, _, err := a.get(ctx, bob, r.Name); errors.Is(err, errNoTask) {
				t.Fatalf("run %s of a refused task is still open", r.ID)
			}
		}
	}
}

func testAnswers(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, time.Hour)
	// Answers to a task that asks nothing are ignored.
	if err := other.answer(ctx, alice, rec.ID, map[string]json.RawMessage{"r1.x": json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	round := &inputRound{Requests: map[string]json.RawMessage{"x": json.RawMessage(`{"method":"roots/list"}`),
		"y": json.RawMessage(`{"method":"roots/list"}`)}, Round: 1}
	round.prefix()
	if _, err := a.write(ctx, rec, 1, 1, false, func(r *record) { r.Status, r.Input, r.Rounds = StatusInputRequired, round, 1 }); err != nil {
		t.Fatal(err)
	}
	// Unknown keys are ignored; a partial answer leaves it input_required.
	if err := other.answer(ctx, alice, rec.ID, map[string]json.RawMessage{"x": json.RawMessage(`0`), "r1.x": json.RawMessage(`1`)}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := a.get(ctx, alice, rec.ID)
	if got.Status != StatusInputRequired || got.Input.answered() || len(got.Input.Responses) != 1 {
		t.Fatalf("after a partial answer: %+v", got.Input)
	}
	if m := got.modern("complete", true); len(m.InputRequests) != 1 || m.InputRequests["r1.y"] == nil {
		t.Fatalf("tasks/get must show exactly the outstanding requests: %v", m.InputRequests)
	}
	// An answered key is not answered again.
	if err := other.answer(ctx, alice, rec.ID, map[string]json.RawMessage{"r1.x": json.RawMessage(`2`), "r1.y": json.RawMessage(`3`)}); err != nil {
		t.Fatal(err)
	}
	got, _, _ = a.get(ctx, alice, rec.ID)
	if !got.Input.answered() || string(got.Input.Responses["r1.x"]) != "1" || string(got.Input.Responses["r1.y"]) != "3" {
		t.Fatalf("answers: %v", got.Input.Responses)
	}
	if got.Input.Keys["r1.x"] != "x" {
		t.Fatalf("prefixed keys must map back to the handler's: %v", got.Input.Keys)
	}
}

// testRacingResults races workers with different fences to record a
// result: exactly one result is recorded, and it is never a result whose
// worker was fenced out before it wrote.
func testRacingResults(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	// Ten rounds at least, and more (up to 200) until one overlapped: on
	// a fast backend and a busy machine six goroutines often do not all
	// start before the first is done.
	overlapped, rounds := 0, 0
	for round := 0; round < 10 || overlapped == 0 && round < 200; round++ {
		rounds++
		rec := mustCreate(t, a, alice, time.Hour)
		const workers = 6
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, workers)
		began, ended := make([]time.Time, workers), make([]time.Time, workers)
		for w := range workers {
			ts := a
			if w%2 == 1 {
				ts = other
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				began[w] = time.Now()
				_, errs[w] = ts.write(ctx, rec, int64(w+1), 1, true, func(r *record) {
					r.Status, r.Result = StatusCompleted, json.RawMessage(`{"w":`+string(rune('0'+w))+`}`)
				})
				ended[w] = time.Now()
			}()
		}
		close(start)
		wg.Wait()
		if slices.MaxFunc(began, time.Time.Compare).Before(slices.MinFunc(ended, time.Time.Compare)) {
			overlapped++ // every call was in flight at one moment
		}
		winners := 0
		for _, err := range errs {
			switch {
			case err == nil:
				winners++
			case errors.Is(err, errFinished), errors.Is(err, errStale):
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d results recorded, want exactly 1 (errors %v)", round, winners, errs)
		}
		got, _, _ := a.get(ctx, alice, rec.ID)
		var w struct{ W int }
		_ = json.Unmarshal(got.Result, &w)
		if !(got.Status == StatusCompleted && got.Fence == int64(w.W+1)) {
			t.Fatalf("round %d: recorded %s with fence %d", round, got.Result, got.Fence)
		}
	}
	if overlapped == 0 {
		t.Fatal("in no round were all the racing writes in flight at once: the race was not tested")
	}
	t.Logf("%d of %d rounds fully overlapped", overlapped, rounds)
}

// testExpiry: an expired task is gone for every request at once, and the
// store's own sweeper removes its records.
func testExpiry(t *testing.T, b storetest.Backend) {
	a, other := pair(t, b, nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, 300*time.Millisecond)
	mustCreate(t, a, alice, time.Hour) // keeps the live set alive
	deadline := time.Now().Add(wait)
	for {
		_, _, err := other.get(ctx, alice, rec.ID)
		if errors.Is(err, errNoTask) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the task did not expire")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := other.cancel(ctx, alice, rec.ID); !errors.Is(err, errNoTask) {
		t.Fatalf("cancel of an expired task: %v", err)
	}
	// The live set no longer counts it.
	e, err := a.st.Get(ctx, liveKey(alice))
	if err != nil {
		t.Fatal(err)
	}
	live, _ := decodeLive(e)
	live.prune(a.now().UnixMilli())
	if _, ok := live.Tasks[rec.ID]; ok {
		t.Fatal("an expired task still counts as live")
	}
	// Every record of the task carries its expiry: the store's sweeper
	// removes them (as the background sweeper does every minute).
	keys := []string{taskKey(rec.ID), listKey(alice, rec.CreatedMs, rec.ID)}
	for _, k := range keys {
		if ok, err := a.st.Exists(ctx, k); err != nil || ok {
			t.Fatalf("%s still live after expiry: %v %v", k, ok, err)
		}
	}
	time.Sleep(10 * time.Millisecond) // past SweepGrace (1ms)
	if _, err := a.st.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	drvKeys := make([]string, len(keys))
	for i, k := range keys {
		drvKeys[i] = "k/" + k // the store keeps entries under k/ (internal/layout)
	}
	recs, err := a.st.Driver().GetMany(ctx, &backend.GetQuery{NS: a.st.NamespaceName(), Keys: drvKeys, IncludeExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Found() {
			t.Fatalf("%s was not removed by the sweep", r.Key)
		}
	}
}

// TestGoAPI: Get, List and Cancel see what the protocols see, owner by
// owner.
func TestGoAPI(t *testing.T) {
	a, _ := pair(t, storetest.New(t, "memory"), nil)
	ctx := context.Background()
	rec := mustCreate(t, a, alice, time.Hour)
	got, err := a.Get(ctx, alice, rec.ID)
	if err != nil || got.ID != rec.ID || got.Status != StatusWorking || got.Tool != "echo" || got.ExpiresAt.IsZero() {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := a.Get(ctx, bob, rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's Get: %v", err)
	}
	if l, _, err := a.List(ctx, alice, ""); err != nil || len(l) != 1 || l[0].ID != rec.ID {
		t.Fatalf("List = %v, %v", l, err)
	}
	if _, err := a.Cancel(ctx, bob, rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("another owner's Cancel: %v", err)
	}
	if c, err := a.Cancel(ctx, alice, rec.ID); err != nil || c.Status != StatusCancelled {
		t.Fatalf("Cancel = %+v, %v", c, err)
	}
	if c, err := a.Cancel(ctx, alice, rec.ID); !errors.Is(err, ErrFinished) || c.Status != StatusCancelled {
		t.Fatalf("a second Cancel = %+v, %v", c, err)
	}
}

// testRacingCreates: creations racing for an owner's last places, through
// two stores, give exactly MaxLive tasks.
func testRacingCreates(t *testing.T, b storetest.Backend) {
	const limit, racers = 25, 40
	a, other := pair(t, b, &Options{MaxLive: limit})
	ctx := context.Background()
	errs := make([]error, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		ts := a
		if i%2 == 1 {
			ts = other
		}
		wg.Go(func() {
			<-start
			_, errs[i] = ts.create(ctx, alice, "", "echo", json.RawMessage(`{}`), time.Hour)
		})
	}
	close(start)
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, errTooMany):
			t.Fatal(err)
		}
	}
	if made != limit {
		t.Fatalf("%d tasks made by %d racers, want exactly the limit %d", made, racers, limit)
	}
	if n, err := a.Live(ctx, alice); err != nil || n != limit {
		t.Fatalf("Live = %d, %v", n, err)
	}
}
