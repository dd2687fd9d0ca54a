package sqlitestate_test

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/statesidecar/state"
)

// within runs f in a goroutine and fails the test if it has not returned
// after two minutes (a bound far above the lock timeouts under test, so it
// is only reached when a call waits without limit).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- f() }()
	select {
	case err := <-got:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s is still waiting after two minutes: waits must be bounded", what)
	}
	return nil
}

// TestWriteBehindAnotherProcessLockFailsAsUnavailable has a child process
// hold the database's write lock: a write with no deadline of its own fails
// after lock_timeout with an error matching state.ErrUnavailable, writes
// nothing, and Ping (which a readiness probe calls) says the store cannot
// write, while reads go on. Once the lock is released both work again.
func TestWriteBehindAnotherProcessLockFailsAsUnavailable(t *testing.T) {
	ctx := context.Background() // no deadline: the bound must come from lock_timeout
	db := filepath.Join(t.TempDir(), "locked.db")
	st, err := state.Open(ctx, "sqlite://"+db+"?lock_timeout=300ms")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Set(ctx, "before", 1); err != nil {
		t.Fatal(err)
	}

	holder := startChild(t, "hold", db)
	if l := holder.next(t); l != "locked" {
		t.Fatalf("holder: %s", l)
	}
	err = within(t, "a write behind another process's lock", func() error {
		_, err := st.Set(ctx, "k", 1)
		return err
	})
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("a write behind another process's lock must fail with ErrUnavailable after lock_timeout, got %v", err)
	}
	t.Logf("the write failed with: %v", err)
	err = within(t, "a claim behind another process's lock", func() error {
		_, err := st.TryAcquireLease(ctx, "l", "A", time.Minute)
		return err
	})
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("every write fails the same way (read-modify-writes too), got %v", err)
	}
	if err := within(t, "Ping", func() error { return st.Ping(ctx) }); !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Ping must report that the store cannot write while another process holds the lock, got %v", err)
	}
	if e, err := st.Get(ctx, "before"); err != nil || string(e.Value) != "1" {
		t.Fatalf("reads go on while another process writes: %v", err)
	}

	if _, err := io.WriteString(holder.stdin, "release\n"); err != nil {
		t.Fatal(err)
	}
	if l := holder.next(t); l != "unlocked" {
		t.Fatalf("holder: %s", l)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping once the lock is free: %v", err)
	}
	if _, err := st.Set(ctx, "k", 2); err != nil {
		t.Fatalf("a write once the lock is free: %v", err)
	}
	if ok, _ := st.Exists(ctx, "k"); !ok {
		t.Fatal("the write after the release is stored")
	}
	h, err := st.Health(ctx)
	if err != nil || h.Keys != 2 {
		t.Fatalf("the failed writes must have written nothing: %d keys, %v", h.Keys, err)
	}
}

func TestLockTimeoutURLParameterIsValidated(t *testing.T) {
	for _, v := range []string{"soon", "-1s", "0"} {
		_, err := state.Open(context.Background(), "sqlite://"+filepath.Join(t.TempDir(), "x.db")+"?lock_timeout="+v)
		if err == nil {
			t.Errorf("lock_timeout=%s must be refused", v)
		}
	}
}
