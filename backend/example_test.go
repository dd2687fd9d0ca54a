package backend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/memstate"
)

// A conditional commit: put a key only if it is absent, atomically with a
// history event. A second commit under the same condition changes nothing
// and names the revision that made the condition fail.
func ExampleDriver_Commit() {
	ctx := context.Background()
	var d backend.Driver = memstate.New()
	defer d.Close()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	txn := &backend.Txn{
		NS:     "demo",
		Now:    now,
		If:     []backend.Cond{{Key: "lock", Revision: 0}}, // absent or expired
		Then:   []backend.Op{{Kind: backend.OpPut, Key: "lock", Value: []byte("a"), Writer: "a", TTL: time.Minute, Time: now}},
		Events: []backend.Event{{Key: "lock", Op: "acquire", Writer: "a"}},
	}
	first, err := d.Commit(ctx, txn)
	if err != nil {
		log.Fatal(err)
	}
	second, err := d.Commit(ctx, txn)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(first.Committed, first.Revision)
	fmt.Println(second.Committed, second.Failed, second.Current)

	r, _ := d.Get(ctx, "demo", "lock", now.Add(time.Minute)) // expired exactly at its expiry
	fmt.Println(r.Found())
	// Output:
	// true 1
	// false 0 1
	// false
}

// A native claim path keeps the fields a claim reads and changes (the run's
// head) where its script reads them directly, and the rest of the run's
// JSON as bytes it never parses; AppendRun gives the value back, byte for
// byte, after the head changed.
func ExampleSplitRun() {
	v := backend.RunValue{Status: backend.RunCreated, Name: "review", Tags: map[string]string{"pr": "42"},
		CreatedAt: 1893456000000, UpdatedAt: 1893456000000}
	value, _ := json.Marshal(v)
	head, tail, ok := backend.SplitRun(value)
	fmt.Println(ok, head.Status, string(tail))

	// A fresh claim, as backend.Claimer's documentation says.
	head.Status, head.AgentJSON = backend.RunClaimed, `"agent-1"`
	head.Attempt, head.Fence, head.ClaimExpiresAt, head.ClaimTTL = 1, 1, 1893456600000, 600000
	claimed, _ := backend.DecodeRun(backend.AppendRun(nil, &head, tail))
	fmt.Println(claimed.Status, claimed.AgentID, claimed.Name, claimed.ClaimLive(1893456000000))
	// Output:
	// true created ,"name":"review","tags":{"pr":"42"},"created_at":1893456000000}
	// claimed agent-1 review true
}
