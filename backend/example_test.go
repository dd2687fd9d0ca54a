package backend_test

import (
	"context"
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
