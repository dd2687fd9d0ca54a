package objstate_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/objstate"
)

// heldSnapshots is a medium whose snapshot writes wait until release is
// closed.
type heldSnapshots struct {
	objstate.Medium
	release chan struct{}
}

func (h heldSnapshots) Write(ctx context.Context, key string, data []byte, c objstate.Cond) (string, error) {
	if strings.Contains(key, "/snap/") {
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
	release := make(chan struct{})
	d := open(t, heldSnapshots{Medium: m.handle(), release: release})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	value := `"` + strings.Repeat("x", 200) + `"`
	for i := range 300 {
		txn := &backend.Txn{NS: "ns", Then: []backend.Op{{Kind: backend.OpPut, Key: fmt.Sprint("k", i), Value: []byte(value)}}}
		if _, err := d.Commit(ctx, txn); err != nil {
			t.Fatal(err)
		}
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
