package filestate_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/filestate"
)

// A store in a directory: JSON files that several processes of one
// machine share and a person can read.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "filestate-example")
	defer os.RemoveAll(dir)

	d, err := filestate.Open(ctx, dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	st, _ := state.New(d, nil)
	defer st.Close()
	if _, err := st.Set(ctx, "plan", map[string]int{"step": 2}); err != nil {
		log.Fatal(err)
	}
	e, _ := st.Get(ctx, "plan")
	fmt.Println(string(e.Value), st.Backend())

	_, err = os.Stat(filepath.Join(dir, "ns", "default", "head.json"))
	fmt.Println("head written:", err == nil)
	// Output:
	// {"step":2} file
	// head written: true
}

// The "file" URL scheme opens a directory by its path.
func ExampleURLOpener() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "filestate-example")
	defer os.RemoveAll(dir)

	a, err := state.Open(ctx, "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	_, _ = a.Set(ctx, "k", "written by a")
	_ = a.Close()

	b, _ := state.Open(ctx, "file://"+dir+"?fsync=false") // another process would do the same
	defer b.Close()
	e, _ := b.Get(ctx, "k")
	fmt.Println(string(e.Value))
	// Output: "written by a"
}
