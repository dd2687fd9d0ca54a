package pgstate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
)

// Open checks the driver's own URL parameters before it connects.
func ExampleOpen_badSchema() {
	_, err := pgstate.Open(context.Background(), "postgres://app@localhost/agents?schema=my-schema", nil)
	fmt.Println(err)
	// Output: pgstate: schema "my-schema" must be a letter or underscore followed by up to 62 letters, digits or underscores
}

// A connection string that cannot be parsed is reported without repeating
// it: it may carry a password.
func ExampleOpen_badURL() {
	_, err := pgstate.Open(context.Background(), "postgres://app:secret@localhost/agents?sslmode=sometimes", nil)
	fmt.Println(err)
	// Output: pgstate: the connection string cannot be used: failed to configure TLS (sslmode is invalid)
}

// Several sidecar replicas open the same URL; schema picks the schema the
// tables live in (created on first open) and namespace the namespace.
// Without an injected clock, the database's clock decides expiry for every
// replica. (Needs a PostgreSQL server, so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	st, err := state.Open(ctx, "postgres://app:secret@db.internal:5432/agents?sslmode=require&schema=state&namespace=reviews")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	run, err := st.CreateRun(ctx, "pr-review", map[string]string{"repo": "org/app"})
	if err != nil {
		log.Fatal(err)
	}
	claim, err := st.ClaimRun(ctx, run.ID, "worker-1", state.WithClaimTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	// Every checkpoint is a heartbeat; the fence makes a stale worker's
	// write fail once another replica has taken the run over.
	if _, err := st.CheckpointRun(ctx, run.ID, 1, map[string]int{"files": 12},
		state.WithAgent("worker-1"), state.WithFence(claim.Fence)); err != nil {
		log.Fatal(err)
	}
}

// New takes a pool the caller configured and owns, here one that goes
// through PgBouncer in transaction pooling mode: pgx must then not create
// named prepared statements (PgBouncer before 1.21 cannot carry them from
// one server connection to another). (Needs PgBouncer, so it is compiled but
// not run.)
func ExampleNew_pgBouncer() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app:secret@pgbouncer:6432/agents?default_query_exec_mode=exec")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	d, err := pgstate.New(ctx, pool, &pgstate.Options{Schema: "agents"})
	if err != nil {
		log.Fatal(err)
	}
	st, err := state.New(d, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Set(ctx, "plan/42", map[string]string{"step": "review"}, state.WithTTL(time.Hour)); err != nil {
		log.Fatal(err)
	}
}

// Writers and MaxBatch (URL parameters writers and max_batch) say how
// concurrent sets, lease calls and claims share transactions: here at most
// two of each kind in flight, and the calls made meanwhile go together, up
// to 32 in one round trip and one transaction. About as many writers as
// the database server has cores suits a busy server. A bad value is refused
// before the driver connects.
func ExampleOpen_batching() {
	_, err := pgstate.Open(context.Background(), "postgres://app@localhost/agents?writers=2&max_batch=none", nil)
	fmt.Println(err)
	// Output: pgstate: URL parameter max_batch="none" is not a whole number of at least 1
}
