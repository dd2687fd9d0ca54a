package state_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/statetest"
)

// The fuzz targets feed arbitrary input to the Store API on a memory store
// with a fake clock. Whatever the input, no call panics, every error is an
// *Error whose cause is a sentinel a caller can branch on, and what a call
// reports is what a later read sees. go test runs them over the seed corpus
// in testdata/fuzz; go test -fuzz explores further (.ci/run does, briefly).

// checkErr fails unless err is nil or an *Error matching one of want.
func checkErr(t *testing.T, what string, err error, want ...error) {
	t.Helper()
	if err == nil {
		return
	}
	var se *state.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: the error is not a *state.Error: %#v", what, err)
	}
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	t.Fatalf("%s: unexpected error %v", what, err)
}

func FuzzKeyValue(f *testing.F) {
	f.Add("plan/42", []byte(`{"a":[1,2.5,"x"]}`), int64(time.Second), int64(-1), int64(500))
	f.Add("k", []byte(`9007199254740993`), int64(0), int64(0), int64(0))
	f.Add("x\xff", []byte(`"v"`), int64(1500*time.Microsecond), int64(3), int64(2))
	f.Fuzz(func(t *testing.T, key string, value []byte, ttl, ifVersion, advanceMs int64) {
		ctx := context.Background()
		st, clk := statetest.NewStore(t)
		var opts []state.SetOption
		if ttl != 0 {
			opts = append(opts, state.WithTTL(time.Duration(ttl)))
		}
		if ifVersion >= 0 {
			opts = append(opts, state.IfVersion(ifVersion))
		}
		e, err := st.Set(ctx, key, json.RawMessage(value), opts...)
		checkErr(t, "Set", err, state.ErrInvalid, state.ErrConflict)
		if err != nil {
			h, _ := st.Health(ctx)
			if h.Keys != 0 || h.Events != 0 {
				t.Fatalf("a refused Set stored something: %+v", h)
			}
			return
		}
		var want bytes.Buffer
		if json.Compact(&want, value) != nil {
			t.Fatalf("Set accepted invalid JSON %q", value)
		}
		got, err := st.Get(ctx, key)
		if err != nil || !bytes.Equal(got.Value, want.Bytes()) || got.Version != e.Version || !got.ExpiresAt.Equal(e.ExpiresAt) {
			t.Fatalf("Get after Set: %+v %v; Set reported %+v", got, err, e)
		}
		if e.ExpiresAt.IsZero() != (ttl == 0) || (ttl != 0 && e.ExpiresAt.Sub(clk.Now()) < time.Duration(ttl)) {
			t.Fatalf("Set with TTL %v reported expiry %v at %v", time.Duration(ttl), e.ExpiresAt, clk.Now())
		}
		page, err := st.List(ctx, key)
		checkErr(t, "List", err)
		if !slices.Contains(page.Keys, key) {
			t.Fatalf("List(%q) = %q misses the key", key, page.Keys)
		}
		clk.Advance(time.Duration(advanceMs%(1<<40)) * time.Millisecond)
		live := e.ExpiresAt.IsZero() || e.ExpiresAt.After(clk.Now())
		ok, err := st.Exists(ctx, key)
		checkErr(t, "Exists", err)
		if ok != live {
			t.Fatalf("at %v the key with expiry %v exists=%v", clk.Now(), e.ExpiresAt, ok)
		}
		deleted, err := st.Delete(ctx, key)
		checkErr(t, "Delete", err)
		if deleted != live {
			t.Fatalf("Delete of a key live=%v reported %v", live, deleted)
		}
	})
}

func FuzzWorkflow(f *testing.F) {
	f.Add("review", "repo", "x/y", "agent-1", int64(3), []byte(`{"ok":true}`), int64(time.Minute), "done")
	f.Add("", "", "", "", int64(-1), []byte(`nul`), int64(-5), "running")
	f.Add("n\x00", "k\xff", "v", "a\xed\xa0\x80", int64(1<<53), []byte(`[]`), int64(1), "")
	f.Fuzz(func(t *testing.T, name, tagK, tagV, agent string, step int64, output []byte, claimTTL int64, status string) {
		ctx := context.Background()
		st, clk := statetest.NewStore(t)
		r, err := st.CreateRun(ctx, name, map[string]string{tagK: tagV})
		checkErr(t, "CreateRun", err, state.ErrInvalid)
		if err != nil {
			return
		}
		p, err := st.DiscoverRuns(ctx, state.RunQuery{Tags: map[string]string{tagK: tagV}, Claimable: true})
		checkErr(t, "DiscoverRuns", err)
		if len(p.Runs) != 1 || p.Runs[0].ID != r.ID {
			t.Fatalf("discovery by the run's own tag found %v", p.Runs)
		}
		c, err := st.ClaimRun(ctx, r.ID, agent, state.WithClaimTTL(time.Duration(claimTTL)))
		checkErr(t, "ClaimRun", err, state.ErrInvalid)
		opts := []state.CheckpointOption{}
		if err == nil {
			opts = append(opts, state.WithAgent(agent), state.WithFence(c.Fence))
		}
		if status != "" {
			opts = append(opts, state.WithStatus(state.Status(status)))
		}
		run, err := st.CheckpointRun(ctx, r.ID, step, json.RawMessage(output), opts...)
		checkErr(t, "CheckpointRun", err, state.ErrInvalid)
		res, rerr := st.ResumeRun(ctx, r.ID)
		checkErr(t, "ResumeRun", rerr)
		if err == nil {
			if res.LastStep != run.LastStep || len(res.Outputs) != 1 || res.Outputs[0].Step != step {
				t.Fatalf("resume after a checkpoint of step %d: %+v", step, res)
			}
		} else if len(res.Outputs) != 0 {
			t.Fatalf("a refused checkpoint stored an output: %+v", res.Outputs)
		}
		clk.Advance(time.Hour)
		_, err = st.ClaimRun(ctx, r.ID, "other")
		checkErr(t, "ClaimRun after expiry", err, state.ErrFinished, state.ErrClaimed)
	})
}

func FuzzLease(f *testing.F) {
	f.Add("deploy", "A", "B", int64(30*time.Second), int64(29_999))
	f.Add("r", "A", "A", int64(1), int64(0))
	f.Add("", "\xff", "b", int64(-time.Second), int64(-1))
	f.Fuzz(func(t *testing.T, resource, a, b string, ttl, advanceMs int64) {
		ctx := context.Background()
		st, clk := statetest.NewStore(t)
		la, err := st.TryAcquireLease(ctx, resource, a, time.Duration(ttl))
		checkErr(t, "TryAcquireLease", err, state.ErrInvalid)
		if err != nil {
			return
		}
		clk.Advance(time.Duration(advanceMs%(1<<40)) * time.Millisecond)
		live := la.ExpiresAt.After(clk.Now())
		lb, err := st.TryAcquireLease(ctx, resource, b, time.Duration(ttl))
		checkErr(t, "second TryAcquireLease", err, state.ErrLeaseHeld, state.ErrInvalid)
		if errors.Is(err, state.ErrInvalid) {
			return
		}
		switch {
		case live && a != b && err == nil:
			t.Fatalf("%q took over %q's live lease", b, a)
		case err == nil && a != b && lb.Fence <= la.Fence:
			t.Fatalf("a new tenure got fence %d, not above %d", lb.Fence, la.Fence)
		case err == nil && a == b && live && lb.Fence != la.Fence:
			t.Fatalf("the holder re-acquiring changed its fence %d to %d", la.Fence, lb.Fence)
		case !live && err != nil:
			t.Fatalf("an expired lease was refused: %v", err)
		}
		ka := st.KeepAlive(ctx, lb)
		ka.Stop()
	})
}

func FuzzPaging(f *testing.F) {
	f.Add("a/", "", 2, "x")
	f.Add("", "!!", -1, "")
	f.Add("\xff\xfe", "YS8", 10001, "wf-000000000000")
	f.Fuzz(func(t *testing.T, prefix, cursor string, limit int, session string) {
		ctx := context.Background()
		st, _ := statetest.NewStore(t)
		for _, k := range []string{"a/1", "a/2", "a/3", "b"} {
			if _, err := st.Set(ctx, k, 1); err != nil {
				t.Fatal(err)
			}
		}
		_, err := st.List(ctx, prefix, state.WithCursor(cursor), state.WithLimit(limit))
		checkErr(t, "List", err, state.ErrInvalid)
		_, err = st.ListRuns(ctx, state.WithCursor(cursor), state.WithLimit(limit))
		checkErr(t, "ListRuns", err, state.ErrInvalid)
		_, err = st.History(ctx, state.HistoryQuery{Key: prefix, Limit: limit, Before: int64(len(cursor))})
		checkErr(t, "History", err, state.ErrInvalid)
		_, err = st.SetSession(ctx, session, json.RawMessage(cursor))
		checkErr(t, "SetSession", err, state.ErrInvalid)
		_, err = st.GetSession(ctx, session)
		checkErr(t, "GetSession", err, state.ErrInvalid, state.ErrNotFound)
	})
}

func FuzzOpen(f *testing.F) {
	f.Add("mem://x?namespace=tenant-1")
	f.Add("mem://?namespace=bad!")
	f.Add("nosuch://")
	f.Add("%zz")
	f.Fuzz(func(t *testing.T, url string) {
		if !strings.HasPrefix(url, "mem:") && strings.Contains(url, ":") && !strings.HasPrefix(url, "nosuch:") {
			return // other schemes open real backends; their own tests fuzz their URLs
		}
		st, err := state.Open(context.Background(), url)
		if err != nil {
			return
		}
		if err := st.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}
