package s3state_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/statesidecar/state/backend/objstate"
	"github.com/statesidecar/state/backend/s3state"
	"github.com/statesidecar/state/internal/s3test"
)

// TestCompareAndSwapLosesNoUpdate increments a counter object by
// compare-and-swap from 16 goroutines over two media (two clients, as two
// processes) and checks that no increment is lost: the medium's reads
// must never pair an ETag with bytes of another version (versitygw can
// answer so), or a PUT If-Match of that ETag would write a value computed
// from stale bytes.
func TestCompareAndSwapLosesNoUpdate(t *testing.T) {
	o := s3test.Options(t)
	ms := []objstate.Medium{openMedium(t, o), openMedium(t, o)}
	ctx := context.Background()
	key := o.Prefix + "ctr"
	if _, err := ms[0].Write(ctx, key, []byte("0"), objstate.Cond{IfAbsent: true}); err != nil {
		t.Fatal(err)
	}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		m := ms[g%2]
		wg.Go(func() {
			for range 20 {
				obj, err := m.Read(ctx, key, "")
				if err != nil {
					t.Error(err)
					return
				}
				n, _ := strconv.Atoi(string(obj.Data))
				_, err = m.Write(ctx, key, []byte(strconv.Itoa(n+1)), objstate.Cond{IfMatch: obj.Tag})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, objstate.ErrConditionFailed), errors.Is(err, objstate.ErrTransient):
				default:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	obj, err := ms[0].Read(ctx, key, "")
	if err != nil {
		t.Fatal(err)
	}
	if string(obj.Data) != strconv.FormatInt(ok.Load(), 10) {
		t.Fatalf("%d compare-and-swaps succeeded, the counter says %s", ok.Load(), obj.Data)
	}
	t.Logf("%d compare-and-swaps succeeded", ok.Load())
}

func openMedium(t *testing.T, o s3state.Options) objstate.Medium {
	t.Helper()
	d, err := s3state.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d.Medium()
}
