package redisstate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/calltest"
	"github.com/statesidecar/state/statetest"
)

// rawRun returns the stored value of run id (after the record's header and
// writer), as a script reads it.
func rawRun(t *testing.T, d *redisstate.Driver, ns, id string) (header, value string) {
	t.Helper()
	s, err := d.Client().Get(ctx, "{"+d.Prefix()+":"+ns+"}:r:"+backend.RunKey(id)).Result()
	if err != nil {
		t.Fatal(err)
	}
	wl := int(uint32(s[32]) | uint32(s[33])<<8 | uint32(s[34])<<16 | uint32(s[35])<<24)
	return s[:36+wl], s[36+wl:]
}

// TestRunsStoredAsJSONAreReadAndClaimed stores a run as versions before
// the packed form did (its JSON after the record's header), and checks
// that it reads back as before and that its first claim, which the script
// leaves to the portable code (backend.ErrSkip), succeeds and stores it
// packed, so that the next claim is served by the script alone.
func TestRunsStoredAsJSONAreReadAndClaimed(t *testing.T) {
	d := newDriver(t, sharedClient(t))
	log := &calltest.Log{}
	st, err := state.New(d, &state.Options{Clock: statetest.NewClock(), SweepInterval: -1, Namespace: "old", Tracer: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.CreateRun(ctx, "job \"<1>\"", map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	header, packed := rawRun(t, d, "old", run.ID)
	if packed == "" || packed[0] != 1 {
		t.Fatalf("a new run is stored as %q, not packed", packed)
	}
	r, err := d.Get(ctx, "old", backend.RunKey(run.ID), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	json := string(r.Value)
	if _, err := d.Client().Set(ctx, "{"+d.Prefix()+":old}:r:"+backend.RunKey(run.ID), header+json, 0).Result(); err != nil {
		t.Fatal(err)
	}
	again, err := st.GetRun(ctx, run.ID)
	if err != nil || again.Name != run.Name || again.Tags["k"] != "v" || again.Status != state.StatusCreated {
		t.Fatalf("a run stored as JSON reads back as %+v, %v; want %+v", again, err, run)
	}

	var c state.Claim
	ops := log.During(func() { c, err = st.ClaimRun(ctx, run.ID, "agent") })
	if err != nil || c.Attempt != 1 || c.Run.Status != state.StatusClaimed {
		t.Fatalf("claim of a run stored as JSON: %+v, %v", c, err)
	}
	if !slices.Equal(ops, []string{"claim", "get_many", "commit"}) {
		t.Errorf("the claim of a run stored as JSON made the calls %v; want the script's, then the portable claim's", ops)
	}
	if _, v := rawRun(t, d, "old", run.ID); v == "" || v[0] != 1 {
		t.Errorf("after its portable claim the run is stored as %q, not packed", v)
	}
	ops = log.During(func() { c, err = st.ClaimRun(ctx, run.ID, "agent") })
	if err != nil || !c.Renewed {
		t.Fatalf("heartbeat: %+v, %v", c, err)
	}
	if !slices.Equal(ops, []string{"claim"}) {
		t.Errorf("a heartbeat of a packed run made the calls %v; want the script's alone", ops)
	}
}

// TestPackedRunsKeepEveryByte writes runs whose JSON the packed form keeps
// in part and rebuilds in part (agents and names that JSON escapes, a
// parent, a step beyond 2^53, claim fields present and absent), and runs
// it cannot pack (numbers a Lua number would not hold), and reads each
// back: the driver must return the very bytes it was given.
func TestPackedRunsKeepEveryByte(t *testing.T) {
	d := newDriver(t, sharedClient(t))
	now := statetest.Epoch
	values := []struct {
		json   string
		packed bool
	}{
		{`{"status":"created","last_step":0,"attempt":0,"fence":0,"updated_at":1,"name":"j","tags":{},"created_at":1}`, true},
		{`{"status":"running","agent_id":"a \"b\" \u003c\u2028","last_step":9007199254740993,"attempt":3,"fence":2,"updated_at":5,"claim_expires_at":9,"claim_ttl_ms":4,"parent_run_id":"wf-000000000001","name":"\u003cj\u003e","tags":{"é":"ü"},"created_at":-1}`, true},
		{`{"status":"waiting","last_step":0,"attempt":0,"fence":0,"updated_at":0,"join":true,"name":"j","tags":null,"created_at":0}`, true},
		{`{"status":"claimed","agent_id":"a","last_step":0,"attempt":100000000000000,"fence":1,"updated_at":0,"name":"j","tags":{},"created_at":0}`, false},
		{`{"not":"a run"}`, false},
		{``, false},
	}
	for i, c := range values {
		v, id := c.json, "wf-"+string(rune('a'+i))
		key := backend.RunKey(id)
		res, err := d.Commit(ctx, &backend.Txn{NS: "bytes", Now: now, Then: []backend.Op{{Kind: backend.OpPut, Key: key, Value: []byte(v), Time: now}}})
		if err != nil || !res.Committed {
			t.Fatalf("commit of %s: %+v, %v", v, res, err)
		}
		r, err := d.Get(ctx, "bytes", key, now)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Value) != v {
			t.Errorf("run stored as\n%s\nreads back as\n%s", v, r.Value)
		}
		if _, raw := rawRun(t, d, "bytes", id); (raw != "" && raw[0] == 1) != c.packed {
			t.Errorf("run %s: stored packed %v, want %v", v, !c.packed, c.packed)
		}
	}
}

// TestCallsForAPrincipalTakeTheScripts checks that claims and lease calls
// made for an authenticated principal (what an authenticating sidecar
// makes) are served by the scripts alone, not by the portable code, and
// that their history records the principal.
func TestCallsForAPrincipalTakeTheScripts(t *testing.T) {
	d := newDriver(t, sharedClient(t))
	log := &calltest.Log{}
	st, err := state.New(d, &state.Options{Clock: statetest.NewClock(), SweepInterval: -1, Namespace: "audited", Tracer: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pctx := state.WithPrincipal(ctx, "alice")
	run, err := st.CreateRun(ctx, "job", nil)
	if err != nil {
		t.Fatal(err)
	}
	only := func(what, op string, f func() error) {
		t.Helper()
		var err error
		ops := log.During(func() { err = f() })
		ops = slices.DeleteFunc(ops, func(c string) bool { return c == "check_config" })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(ops, []string{op}) {
			t.Errorf("%s for a principal made the calls %v; want the script's alone", what, ops)
		}
	}
	only("a claim", "claim", func() error { _, err := st.ClaimRun(pctx, run.ID, "agent"); return err })
	only("a heartbeat", "claim", func() error { _, err := st.ClaimRun(pctx, run.ID, "agent"); return err })
	only("an acquire", "lease", func() error { _, err := st.TryAcquireLease(pctx, "res", "agent", time.Minute); return err })
	only("a renew", "lease", func() error { _, err := st.RenewLease(pctx, "res", "agent", time.Minute); return err })
	for _, key := range []string{run.ID, "res"} {
		evs, err := st.History(ctx, state.HistoryQuery{Key: key, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.AgentID != "agent" || e.Principal != "alice" {
				t.Errorf("history of %s: %s by %q for %q; want agent for alice", key, e.Op, e.AgentID, e.Principal)
			}
		}
	}
}
