package state_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/statesidecar/state"
	_ "github.com/statesidecar/state/backend/filestate" // file://
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/encryption"
	"github.com/statesidecar/state/internal/storetest"
)

// TestPrincipalInHistory checks, on every backend (the native claim and
// lease of Redis and PostgreSQL included, and the object-store design on a
// directory), that every kind of write made
// with WithPrincipal records the principal in its history entries, apart
// from the agent id, and that writes without one record none.
func TestPrincipalInHistory(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) { checkPrincipalInHistory(t, storetest.Open(t, b.URL, nil)) })
	// The object-store design, on its directory medium.
	t.Run("file", func(t *testing.T) {
		st, err := state.Open(t.Context(), "file://"+t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		checkPrincipalInHistory(t, st)
	})
}

// checkPrincipalInHistory is TestPrincipalInHistory on st.
func checkPrincipalInHistory(t *testing.T, st *state.Store) {
	ctx := state.WithPrincipal(t.Context(), "alice@example.com")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Set(ctx, "k", 1, state.WithAgent("agent-7")))
	run, err := st.CreateRun(ctx, "r", nil, state.WithAgent("agent-7"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.ClaimRun(ctx, run.ID, "agent-7")
	if err != nil {
		t.Fatal(err)
	}
	must(st.ClaimRun(ctx, run.ID, "agent-7")) // a heartbeat
	must(st.CheckpointRun(ctx, run.ID, 1, "out", state.WithAgent("agent-7"), state.WithFence(c.Fence)))
	must(st.TryAcquireLease(ctx, "res", "agent-7", time.Minute))
	must(st.RenewLease(ctx, "res", "agent-7", time.Minute))
	must(st.ReleaseLease(ctx, "res", "agent-7"))
	must(st.SetSession(ctx, "s", map[string]any{"a": 1}, state.WithAgent("agent-7")))
	must(st.Delete(ctx, "k"))
	// Without a principal: none recorded, even for an agent id that
	// tries to look like one.
	must(st.Set(t.Context(), "plain", 1, state.WithAgent("agent-8\x1fmallory")))
	must(st.TryAcquireLease(t.Context(), "res2", "agent-8\x1fmallory", time.Minute))

	evs, err := st.History(t.Context(), state.HistoryQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, e := range evs {
		switch e.Key {
		case "plain", "res2":
			if e.Principal != "" || e.AgentID != "agent-8\x1fmallory" {
				t.Errorf("%s %s: agent %q principal %q, want the agent id whole and no principal", e.Op, e.Key, e.AgentID, e.Principal)
			}
		default:
			ops[e.Op] = true
			if e.Principal != "alice@example.com" {
				t.Errorf("%s %s: principal %q, want alice@example.com", e.Op, e.Key, e.Principal)
			}
			if e.AgentID != "agent-7" && e.AgentID != "" {
				t.Errorf("%s %s: agent id %q", e.Op, e.Key, e.AgentID)
			}
		}
	}
	for _, op := range []string{"kv.set", "kv.delete", "workflow.create", "workflow.claim", "workflow.heartbeat",
		"workflow.checkpoint", "lease.acquire", "lease.renew", "lease.release", "session.save"} {
		if !ops[op] {
			t.Errorf("no %s entry with the principal in %v", op, ops)
		}
	}
	// The entry, the lease and the claim read back with the agent id alone.
	r, err := st.GetRun(t.Context(), run.ID)
	if err != nil || r.AgentID != "agent-7" {
		t.Errorf("run's agent id = %q, %v", r.AgentID, err)
	}
	must(st.Set(ctx, "k2", 2, state.WithAgent("agent-7")))
	if e, err := st.Get(t.Context(), "k2"); err != nil || e.AgentID != "agent-7" {
		t.Errorf("entry's agent id = %q, %v", e.AgentID, err)
	}
	if e, err := st.Get(t.Context(), "plain"); err != nil || e.AgentID != "agent-8\x1fmallory" {
		t.Errorf("entry's agent id = %q, %v", e.AgentID, err)
	}
}

func ExampleWithPrincipal() {
	st, _ := state.New(memstate.New(), nil)
	defer st.Close()
	ctx := state.WithPrincipal(context.Background(), "alice@example.com")
	_, _ = st.Set(ctx, "plan", "draft", state.WithAgent("planner-1"))
	evs, _ := st.History(context.Background(), state.HistoryQuery{})
	fmt.Println(evs[0].Op, evs[0].AgentID, evs[0].Principal)
	// Output: kv.set planner-1 alice@example.com
}

// BenchmarkPrincipalClaim compares a heartbeat claim with and without a
// principal on each backend: with one, Redis's script records it (one
// round trip either way), while PostgreSQL's claim function declines
// (backend.ErrSkip) and the portable path serves the claim.
func BenchmarkPrincipalClaim(b *testing.B) {
	for _, name := range storetest.Names {
		bk := storetest.New(b, name)
		if bk.Skip != "" {
			continue
		}
		st := storetest.Open(b, bk.URL, nil)
		for _, mode := range []string{"plain", "principal"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				ctx := b.Context()
				if mode == "principal" {
					ctx = state.WithPrincipal(ctx, "alice")
				}
				run, err := st.CreateRun(ctx, "r", nil)
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := st.ClaimRun(ctx, run.ID, "agent"); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestPrincipalWithEncryption: on an encrypted store the principal is
// recorded and every sealed payload still opens (the writer is not part of
// what a ciphertext is bound to).
func TestPrincipalWithEncryption(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	enc, err := encryption.Open(t.Context(), "base64key://"+base64.StdEncoding.EncodeToString(key))
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(memstate.New(), &state.Options{Encryption: enc, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	checkPrincipalInHistory(t, st)
	evs, err := st.History(t.Context(), state.HistoryQuery{Key: "k2"})
	if err != nil || len(evs) != 1 || string(evs[0].Value) != "2" || evs[0].Principal != "alice@example.com" {
		t.Fatalf("history of k2 = %+v, %v", evs, err)
	}
}
