package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/statesidecar/state/backend"
)

func TestEnded(t *testing.T) {
	if err := backend.Ended(context.Background()); err != nil {
		t.Fatalf("live context: %v", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backend.Ended(canceled); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
	// A deadline in the past: the answer does not wait for ctx's timer.
	past, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	if err := backend.Ended(past); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline passed: %v", err)
	}
	later, stop2 := context.WithTimeout(context.Background(), time.Hour)
	defer stop2()
	if err := backend.Ended(later); err != nil {
		t.Fatalf("deadline ahead: %v", err)
	}
}
