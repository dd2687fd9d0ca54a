package objstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/objstate"
)

// heldSnapshots is a medium whose snapshot writes wait until release is
// closed; held is closed when the first one waits.
type heldSnapshots struct {
	objstate.Medium
	release chan struct{}
	held    chan struct{}
	once    *sync.Once
}

func (h heldSnapshots) Write(ctx context.Context, key string, data []byte, c objstate.Cond) (string, error) {
	if strings.Contains(key, "/snap/") {
		h.once.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return h.Medium.Write(ctx, key, data, c)
}

// TestWaitCompactionsWaitsForTheSnapshot writes a namespace well past the
// snapshot threshold with the snapshot's writes held: WaitCompactions does
// not return while the snapshot job runs, and once the writes go through
// it returns with the head naming the snapshot.
func TestWaitCompactionsWaitsForTheSnapshot(t *testing.T) {
	m := newMemMedium()
	release, held := make(chan struct{}), make(chan struct{})
	d := open(t, heldSnapshots{Medium: m.handle(), release: release, held: held, once: new(sync.Once)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := `"` + strings.Repeat("x", 200) + `"`
	// Write until a snapshot job waits on its first part (the threshold
	// is 16 KiB of log: about eighty of these).
	for i := 0; ; i++ {
		select {
		case <-held:
		default:
			if i == 10_000 {
				t.Fatal("10,000 commits and no snapshot started")
			}
			txn := &backend.Txn{NS: "ns", Then: []backend.Op{{Kind: backend.OpPut, Key: fmt.Sprint("k", i), Value: []byte(value)}}}
			if _, err := d.Commit(ctx, txn); err != nil {
				t.Fatal(err)
			}
			continue
		}
		break
	}

	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if err := d.WaitCompactions(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitCompactions with the snapshot held: %v, want the context's deadline", err)
	}

	close(release)
	if err := d.WaitCompactions(ctx); err != nil {
		t.Fatal(err)
	}
	head, err := m.Read(ctx, "ns/ns/head.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(head.Data, []byte(`"snapshot":`)) {
		t.Fatalf("the head names no snapshot after the compactions: %.300s", head.Data)
	}
}
