package eino_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	einoadk "github.com/cloudwego/eino/adk"
	"github.com/matryer/is"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/eino"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/statesidecar/state/statetest"
)

// The store is what Eino's runners take, with the optional deleter.
var (
	_ einoadk.CheckPointStore   = (*eino.CheckPointStore)(nil)
	_ einoadk.CheckPointDeleter = (*eino.CheckPointStore)(nil)
)

// A real Eino graph interrupted in one process is resumed from its
// checkpoint in another, on every backend processes can share.
func TestGraphInterruptedInOneProcessResumesInAnother(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "approval")
	if out, err := exec.Command("go", "build", "-o", bin, "./examples/approval").CombinedOutput(); err != nil {
		t.Fatalf("building examples/approval: %v\n%s", err, out)
	}
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		if !b.Shared {
			t.Skip("the memory backend lives in one process")
		}
		is := is.New(t)
		run := func(args ...string) string {
			out, err := exec.CommandContext(t.Context(), bin, append([]string{"-store", b.URL, "-run", "order-42"}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("approval %v: %v\n%s", args, err, out)
			}
			return strings.TrimSpace(string(out))
		}
		first := run("-input", "refund 30 EUR")
		before, id, ok := strings.Cut(first, "(interrupt ")
		is.True(ok) // the first process stops at the approval
		is.Equal(before, "interrupted: waiting for approval ")
		id = strings.TrimSuffix(id, ")")

		cps, err := eino.NewCheckPointStore(storetest.Open(t, b.URL, nil), nil)
		is.NoErr(err)
		cp, found, err := cps.Get(t.Context(), "order-42")
		is.NoErr(err)
		is.True(found)                                       // the checkpoint is in the store
		is.True(bytes.Contains(cp, []byte("refund 30 EUR"))) // with the drafted text in it

		is.Equal(run("-resume", id, "-approver", "ada"), "refund 30 EUR | drafted | approved by ada | published") // another process finishes it
	})
}

func TestCheckPointTTLSetGetDelete(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		clk := statetest.NewClock()
		st := storetest.Open(t, b.URL, &state.Options{Clock: clk, SweepInterval: -1})
		cps, err := eino.NewCheckPointStore(st, &eino.Options{TTL: time.Hour})
		is.NoErr(err)
		_, found, err := cps.Get(ctx, "c1")
		is.NoErr(err)
		is.True(!found) // a missing checkpoint is not found, without error
		data := []byte{0, 1, 2, 0xff, 'x'}
		is.NoErr(cps.Set(ctx, "c1", data))
		got, found, err := cps.Get(ctx, "c1")
		is.NoErr(err)
		is.True(found)
		is.Equal(got, data) // any bytes round-trip
		clk.Advance(59 * time.Minute)
		is.NoErr(cps.Set(ctx, "c1", []byte("newer"))) // a Set starts the TTL again
		clk.Advance(59 * time.Minute)
		got, found, _ = cps.Get(ctx, "c1")
		is.True(found)
		is.Equal(string(got), "newer")
		clk.Advance(time.Minute)
		_, found, err = cps.Get(ctx, "c1")
		is.NoErr(err)
		is.True(!found) // a checkpoint nobody resumed expires after its TTL

		is.NoErr(cps.Set(ctx, "c2", []byte("x")))
		is.NoErr(cps.Delete(ctx, "c2"))
		_, found, _ = cps.Get(ctx, "c2")
		is.True(!found)                      // Delete removes it
		is.NoErr(cps.Delete(ctx, "missing")) // deleting a missing checkpoint is fine
	})
}

func TestCheckPointStoreRefusesBadInput(t *testing.T) {
	is := is.New(t)
	st := storetest.Open(t, storetest.New(t, "memory").URL, nil)
	_, err := eino.NewCheckPointStore(st, &eino.Options{TTL: -time.Second})
	is.True(err != nil) // a negative TTL
	cps, err := eino.NewCheckPointStore(st, &eino.Options{Prefix: "cp/"})
	is.NoErr(err)
	err = cps.Set(t.Context(), "big", make([]byte, 1<<20))
	is.True(err != nil) // a checkpoint over the store's value limit is refused, clearly
	is.True(strings.Contains(err.Error(), "limit"))
	keys, _ := st.List(t.Context(), "cp/")
	is.Equal(len(keys.Keys), 0) // and nothing was stored
}
