package pgstate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
)

// TestNotify checks the notifier on its own: it calls fn("") once it
// listens, then with the namespace of every commit, also of a namespace
// too long for a notification's payload (""), and returns ctx's error soon
// after ctx ends, unregistered.
func TestNotify(t *testing.T) {
	d := newDriver(t)
	nctx, stop := context.WithCancel(ctx)
	got := make(chan string, 16)
	done := make(chan error, 1)
	go func() { done <- d.Notify(nctx, func(ns string) { got <- ns }) }()
	next := func() string {
		t.Helper()
		select {
		case ns := <-got:
			return ns
		case <-time.After(pgtest.Wait):
			t.Fatal("no notification")
			return ""
		}
	}
	if ns := next(); ns != "" {
		t.Fatalf("first call: fn(%q), want fn(\"\")", ns)
	}
	long := strings.Repeat("n", 8000)
	for _, c := range []struct{ ns, want string }{{"a", "a"}, {"b", "b"}, {long, ""}} {
		_, err := d.Commit(ctx, &backend.Txn{NS: c.ns, Then: []backend.Op{{Kind: backend.OpPut, Key: "k", Value: []byte("v")}}})
		if err != nil {
			t.Fatal(err)
		}
		if ns := next(); ns != c.want {
			t.Fatalf("after a commit to %.10q: fn(%.10q), want fn(%q)", c.ns, ns, c.want)
		}
	}
	stop()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Notify returned %v, want context.Canceled", err)
		}
		// The listener took its registration with it: writers stop
		// notifying.
		var n int
		if err := d.Pool().QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{d.Schema()}.Sanitize()+`.listeners`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d listeners left registered (%v)", n, err)
		}
	case <-time.After(pgtest.Wait):
		t.Fatal("Notify did not return after ctx ended")
	}
}

// TestNotifyOff checks that Options.Listen "off" turns notifications off.
func TestNotifyOff(t *testing.T) {
	pool := sharedPool(t)
	d, err := pgstate.New(ctx, pool, &pgstate.Options{Schema: pgtest.Schema(t, pgtest.URL(t)), Listen: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Notify(ctx, func(string) {}); !errors.Is(err, pgstate.ErrNoNotifications) {
		t.Fatalf("Notify with Listen off: %v, want ErrNoNotifications", err)
	}
}
