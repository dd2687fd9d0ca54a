package pgstate

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/calltest"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/statetest"
)

// migrateTo brings a new schema to version v only, as a library of that
// version would have.
func migrateTo(t *testing.T, ctx context.Context, pool *pgxpool.Pool, schema string, v int) {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{schema}.Sanitize()
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+q+"; CREATE TABLE "+q+
			".migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
			return err
		}
		for _, m := range ms[:v] {
			if _, err := tx.Exec(ctx, expand(m.sql, schema)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "INSERT INTO "+q+".migrations (version) VALUES ($1)", m.version); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunsStoredBeforeVersion4AreClaimed has version 3's commit function
// store a run (its JSON, before the run columns existed) and then opens
// the driver, which migrates the schema to version 4: the run reads back
// as it was, its first claim is served by package state's portable code
// (claim_run answers that the run's columns do not hold, and the
// driver backend.ErrSkip), whose commit fills the columns, and from then
// on claim_run alone serves its claims.
func TestRunsStoredBeforeVersion4AreClaimed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	u := pgtest.URL(t)
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	schema := pgtest.Schema(t, u)
	migrateTo(t, ctx, pool, schema, 3)

	// Version 3's commit of a new run and its counter: the parameters of
	// today's commit function but the run columns, which it did not have.
	clk := statetest.NewClock()
	now := clk.Now()
	id := "wf-00000000abcd"
	v := backend.RunValue{Status: backend.RunCreated, Name: "job \"<1>\"", Tags: map[string]string{"k": "v"},
		CreatedAt: now.UnixMilli(), UpdatedAt: now.UnixMilli()}
	val, _ := json.Marshal(v)
	txn := &backend.Txn{NS: "ns", Now: now, If: []backend.Cond{{Key: backend.RunKey(id)}},
		Then: []backend.Op{{Kind: backend.OpPut, Key: backend.RunKey(id), Value: val, Time: now},
			{Kind: backend.OpAdd, Key: "n/s/unstarted", Value: []byte("1"), Time: now}},
		Events: []backend.Event{{Key: id, Op: "workflow.create", Value: []byte(`{}`)}}}
	v3 := &Driver{schema: schema, counters: backend.CounterPrefix}
	oldCommit := func(txn *backend.Txn) {
		t.Helper()
		args, err := v3.commitArgs(txn, txn.Now.UnixMilli(), false)
		if err != nil {
			t.Fatal(err)
		}
		var committed bool
		if err := pool.QueryRow(ctx, `SELECT committed FROM `+pgx.Identifier{schema}.Sanitize()+`.commit($1::text, $2::bigint,
			$3::bigint, $4::boolean, $5::bigint[], $6::bytea[], $7::bigint[], $8::smallint[], $9::bytea[], $10::bytea[],
			$11::text[], $12::bigint[], $13::bigint[], $14::boolean, $15::bytea[], $16::text[], $17::bytea[],
			$18::bytea[], $19::bytea[], $20::text[], $21::bigint[], $22::boolean[], $23::bytea[])`, args[:23]...).Scan(&committed); err != nil || !committed {
			t.Fatalf("version 3's commit: %v, %v", committed, err)
		}
	}
	oldCommit(txn)

	d, err := New(ctx, pool, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := schemaVersion(ctx, pool, schema); err != nil || got != SchemaVersion || got < 4 {
		t.Fatalf("schema version %d (%v) after New, want %d", got, err, SchemaVersion)
	}
	log := &calltest.Log{}
	st, err := state.New(d, &state.Options{Clock: clk, SweepInterval: -1, Namespace: "ns", Tracer: log})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.GetRun(ctx, id)
	if err != nil || r.Name != v.Name || r.Tags["k"] != "v" || r.Status != state.StatusCreated {
		t.Fatalf("the run stored by version 3 reads back as %+v, %v", r, err)
	}
	columns := func() (held bool, status *string) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce(run_rev = rev, false), run_status FROM `+pgx.Identifier{schema}.Sanitize()+
			`.records WHERE ns = 'ns' AND key = $1`, []byte(backend.RunKey(id))).Scan(&held, &status); err != nil {
			t.Fatal(err)
		}
		return held, status
	}
	if held, _ := columns(); held {
		t.Fatal("a run stored by version 3 has run columns that hold")
	}

	var c state.Claim
	ops := log.During(func() { c, err = st.ClaimRun(ctx, id, "agent") })
	if err != nil || c.Attempt != 1 || c.Run.Status != state.StatusClaimed {
		t.Fatalf("first claim: %+v, %v", c, err)
	}
	if !slices.Equal(ops, []string{"claim", "update"}) {
		t.Errorf("the first claim made the calls %v; want claim_run's, then the portable claim's", ops)
	}
	if held, status := columns(); !held || status == nil || *status != backend.RunClaimed {
		t.Errorf("after its first claim the run's columns hold %v, status %v; want claimed", held, status)
	}
	clk.Advance(time.Second)
	ops = log.During(func() { c, err = st.ClaimRun(ctx, id, "agent") })
	if err != nil || !c.Renewed {
		t.Fatalf("heartbeat: %+v, %v", c, err)
	}
	if !slices.Equal(ops, []string{"claim"}) {
		t.Errorf("a heartbeat made the calls %v; want claim_run's alone", ops)
	}

	// A process of an earlier version, still running beside this one,
	// writes the run with its commit function (which stays), as a
	// checkpoint would: the columns no longer hold, and the next claim
	// must see the step it wrote, not what the columns say.
	cur, err := d.Get(ctx, "ns", backend.RunKey(id), clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	rv, err := backend.DecodeRun(cur.Value)
	if err != nil {
		t.Fatal(err)
	}
	rv.Status, rv.LastStep = backend.RunRunning, 5
	val, _ = json.Marshal(rv)
	oldCommit(&backend.Txn{NS: "ns", Now: clk.Now(), If: []backend.Cond{{Key: backend.RunKey(id), Revision: cur.Revision}},
		Then: []backend.Op{{Kind: backend.OpPut, Key: backend.RunKey(id), Value: val, Time: clk.Now()}}})
	if held, _ := columns(); held {
		t.Fatal("the run columns hold after a write by version 3's commit function")
	}
	ops = log.During(func() { c, err = st.ClaimRun(ctx, id, "agent") })
	if err != nil || !c.Renewed || c.Run.LastStep != 5 || c.Run.Status != state.StatusRunning {
		t.Fatalf("heartbeat after an older process's write: %+v, %v; want last step 5, running", c, err)
	}
	if !slices.Equal(ops, []string{"claim", "update"}) {
		t.Errorf("a claim after an older process's write made the calls %v; want the portable claim's after the function's", ops)
	}
	n, err := st.Health(ctx)
	if err != nil || n.RunsByStatus[state.StatusClaimed] != 1 {
		t.Errorf("health after the claims: %+v, %v; want one claimed run", n, err)
	}
}
