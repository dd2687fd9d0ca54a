package sqlitestate_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/sqlitestate"
)

// Open a store on a SQLite file; the data is still there after reopening.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "state-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")

	d, err := sqlitestate.Open(ctx, path, nil)
	if err != nil {
		log.Fatal(err)
	}
	st, err := state.New(d, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Set(ctx, "greeting", "hello"); err != nil {
		log.Fatal(err)
	}
	st.Close()

	// The same file through a URL, as the sidecar opens it.
	st, err = state.Open(ctx, "sqlite://"+path)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	e, err := st.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(e.Value), st.Backend())
	// Output: "hello" sqlite
}
