package pyimport_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/pythontest"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/pyimport"
)

// pythonRedis starts a Redis of the test's own (the Python layout has fixed
// key names, so it never shares a database) and returns a client and URL.
func pythonRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb, srv.URL() + "/0"
}

// TestImportRedis imports the Python fixture's Redis layout into every
// backend, twice: everything arrives the first time (remaining TTLs from
// Redis's own), nothing is duplicated or written the second time, and the
// Python keys are not changed.
func TestImportRedis(t *testing.T) {
	rdb, url := pythonRedis(t)
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		ctx := context.Background()
		if err := rdb.FlushDB(ctx).Err(); err != nil { // the test's own server
			t.Fatal(err)
		}
		f := pythontest.Standard(time.Now())
		f.WriteRedis(t, rdb)
		keys, _ := rdb.Keys(ctx, "*").Result()
		st, err := storetest.Open(t, b.URL, &state.Options{SweepInterval: -1}).Namespace("imported")
		if err != nil {
			t.Fatal(err)
		}
		rep, err := pyimport.Import(ctx, open(t, url), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		want(t, rep, map[pyimport.Kind]pyimport.Count{
			pyimport.Keys:     {Found: 5, Imported: 5},
			pyimport.Sessions: {Found: 2, Imported: 2},
			pyimport.Leases:   {Found: 1, Imported: 1},
			pyimport.Runs:     {Found: 6, Imported: 6},
			pyimport.Outputs:  {Found: 7, Imported: 6, Skipped: 1},
		})
		if len(rep.Notes) != 2 || !strings.Contains(rep.Notes[0], "1 wf:step keys belong to no run") ||
			!strings.Contains(rep.Notes[1], "1 run ids in wf:index have no wf:meta key") {
			t.Errorf("notes %q", rep.Notes)
		}
		if !strings.Contains(rep.Source, "Redis redis://127.0.0.1:") {
			t.Errorf("source %q", rep.Source)
		}
		f.Check(t, st, pythontest.FromRedis)

		rep, err = pyimport.Import(ctx, open(t, url), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		want(t, rep, map[pyimport.Kind]pyimport.Count{
			pyimport.Keys:     {Found: 5, Present: 5},
			pyimport.Sessions: {Found: 2, Present: 2},
			pyimport.Leases:   {Found: 1, Present: 1},
			pyimport.Runs:     {Found: 6, Present: 6},
			pyimport.Outputs:  {Found: 7, Present: 6, Skipped: 1},
		})
		f.Check(t, st, pythontest.FromRedis)
		after, _ := rdb.Keys(ctx, "*").Result()
		if len(after) != len(keys) {
			t.Errorf("the import changed the Python keys: %d before, %d after", len(keys), len(after))
		}
	})
}

// TestImportRedisAfterLuaClaim: a run the Python Redis backend's claim
// script re-encoded (Lua cjson: other field order, 14 significant digits,
// an empty tag table written as []) arrives like any other.
func TestImportRedisAfterLuaClaim(t *testing.T) {
	ctx := context.Background()
	rdb, url := pythonRedis(t)
	rdb.Set(ctx, "wf:meta:wf-00000000cafe", `{"updated_at":1718000123.4568,"agent_id":"worker-a","tags":[],"status":"claimed","name":"n","last_step":0,"run_id":"wf-00000000cafe","created_at":1718000000.125}`, 0)
	rdb.SAdd(ctx, "wf:index", "wf-00000000cafe")
	st := storetest.Open(t, "mem://", nil)
	rep, err := pyimport.Import(ctx, open(t, url), st, nil)
	if err != nil || rep.Counts[pyimport.Runs].Imported != 1 {
		t.Fatalf("%+v, %v", rep, err)
	}
	r, err := st.GetRun(ctx, "wf-00000000cafe")
	if err != nil || r.Status != state.StatusClaimed || r.AgentID != "worker-a" || len(r.Tags) != 0 || r.UpdatedAt.UnixMilli() != 1718000123457 || !r.Claimable {
		t.Errorf("run %+v, %v", r, err)
	}
}

// TestOpenRedisRefusesARedisWithoutPythonKeys: a Redis holding none of the
// Python sidecar's keys is an error matching ErrNotPython, saying what it
// looked for; so is a Python value that is not what Python writes, as a
// problem of that record.
func TestOpenRedisRefusesARedisWithoutPythonKeys(t *testing.T) {
	ctx := context.Background()
	rdb, url := pythonRedis(t)
	rdb.Set(ctx, "app:user:1", "x", 0)
	_, err := pyimport.Open(ctx, url)
	if !errors.Is(err, pyimport.ErrNotPython) || !strings.Contains(err.Error(), "no key kv:*, lease:*, wf:meta:*, wf:step:*, wf:index or session:* (it holds 1 other keys)") {
		t.Errorf("Open of a Redis without Python keys: %v", err)
	}
	if _, err := pyimport.Open(ctx, "redis://127.0.0.1:1/0"); err == nil {
		t.Error("Open of a Redis nobody listens on succeeded")
	}
	rdb.Set(ctx, "kv:k", "not json", 0)
	rdb.SAdd(ctx, "kv:set", "a")
	rdb.Set(ctx, "lease:l", `{"expires_at": 1}`, time.Hour)
	rdb.Set(ctx, "wf:meta:wf-1", `{"status": "created"`, 0)
	st := storetest.Open(t, "mem://", nil)
	rep, err := pyimport.Import(ctx, open(t, url), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, p := range rep.Problems {
		problems = append(problems, p.String())
	}
	got := strings.Join(problems, "\n")
	for _, w := range []string{`keys "k": value is not valid JSON`, `keys "set": kv:set cannot be read as a string: WRONGTYPE`,
		`leases "l": the lease {"expires_at": 1} has no holder_id`, `runs "wf-1": wf:meta:wf-1 is not a WorkflowMeta JSON object`} {
		if !strings.Contains(got, w) {
			t.Errorf("problems\n%s\nlack %q", got, w)
		}
	}
}
