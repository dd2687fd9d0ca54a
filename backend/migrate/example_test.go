package migrate_test

import (
	"context"
	"fmt"
	"log"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/memstate"
	"github.com/statesidecar/state/backend/migrate"
)

// Copy moves a namespace, history included, from one driver to another.
func ExampleCopy() {
	ctx := context.Background()
	from, to := memstate.New(), memstate.New()
	src, _ := state.New(from, nil)
	defer src.Close()
	_, _ = src.Set(ctx, "a", 1)
	_, _ = src.Set(ctx, "a", 2)

	rep, err := migrate.Copy(ctx, from, to, &migrate.Options{Namespaces: []string{"default"}})
	if err != nil {
		log.Fatal(err)
	}
	n := rep.Namespaces[0]
	fmt.Println(n.Namespace, n.Records, n.Events)

	dst, _ := state.New(to, nil)
	defer dst.Close()
	e, _ := dst.Get(ctx, "a")
	h, _ := dst.History(ctx, state.HistoryQuery{Key: "a"})
	fmt.Println(string(e.Value), len(h))
	// Output:
	// default 1 2
	// 2 2
}
