package objstate_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/filestate"
)

// A driver names the namespaces its store holds (the copy command uses
// it to copy them all).
func ExampleDriver_Namespaces() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "objstate-example")
	defer os.RemoveAll(dir)
	d, err := filestate.Open(ctx, dir, nil) // the directory medium; s3state.Open gives the same driver on S3
	if err != nil {
		log.Fatal(err)
	}
	st, _ := state.New(d, nil)
	defer st.Close()
	team, _ := st.Namespace("team-a")
	_, _ = st.Set(ctx, "k", 1)
	_, _ = team.Set(ctx, "k", 2)

	names, _ := d.Namespaces(ctx)
	fmt.Println(names)
	// Output: [default team-a]
}

// RaiseRevision makes a namespace's next revisions exceed a number, so
// that versions and fences copied from another store keep growing.
func ExampleDriver_RaiseRevision() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "objstate-example")
	defer os.RemoveAll(dir)
	d, _ := filestate.Open(ctx, dir, nil)
	st, _ := state.New(d, nil)
	defer st.Close()

	_ = d.RaiseRevision(ctx, "default", 1000)
	e, _ := st.Set(ctx, "k", true)
	fmt.Println(e.Version > 1000)
	// Output: true
}
