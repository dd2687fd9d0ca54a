package redisstate_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
)

// Open checks its URL before it connects: a parameter that neither
// redisstate nor go-redis knows is an error, not silently ignored.
func ExampleOpen_unknownParameter() {
	_, err := redisstate.Open(context.Background(), "redis://localhost:6379/0?prefix=agents&colour=blue")
	fmt.Println(err)
	// Output: redisstate: redis: unexpected option: colour
}

// A prefix may not contain braces: they delimit the hash tag that keeps a
// namespace in one Cluster slot.
func ExampleNew_badPrefix() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	_, err := redisstate.New(context.Background(), rdb, &redisstate.Options{Prefix: "{agents}"})
	fmt.Println(err)
	// Output: redisstate: prefix "{agents}" must not contain '{' or '}' (they delimit the hash tag)
}

// Several sidecar replicas open the same URL; a namespace parameter selects
// the namespace. Without an injected clock, Redis's clock decides expiry for
// every replica. (Needs a Redis server, so it is compiled but not run.)
func Example() {
	ctx := context.Background()
	st, err := state.Open(ctx, "redis://localhost:6379/0?namespace=reviews")
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

// New takes a client the caller configured and owns: here a Cluster
// client, shared by two drivers with different key prefixes. (Needs a Redis
// Cluster, so it is compiled but not run.)
func ExampleNew() {
	ctx := context.Background()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		ContextTimeoutEnabled: true, // honour each call's deadline
		MaxRetries:            -1,   // never send a write script twice
	})
	defer rdb.Close()
	agents, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: "agents"})
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := redisstate.New(ctx, rdb, &redisstate.Options{Prefix: "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	a, err := state.New(agents, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	j, err := state.New(jobs, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close()
	if _, err := a.TryAcquireLease(ctx, "leader", "sidecar-1", 15*time.Second); err != nil {
		log.Fatal(err)
	}
}
