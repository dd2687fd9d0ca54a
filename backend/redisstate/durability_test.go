package redisstate_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
)

// TestFencesStayAboveThoseHandedOutBeforeRedisLostItsData restarts a
// redis-server that persists nothing between two acquires of a lease: the
// second tenure's fence (and a key's version) must still be greater, or a
// stale holder's fence would be accepted again.
func TestFencesStayAboveThoseHandedOutBeforeRedisLostItsData(t *testing.T) {
	redistest.URL(t)
	srv := redistest.Start(t) // --save "" --appendonly no: a restart loses everything
	d, err := redisstate.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.New(d, &state.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a, err := st.TryAcquireLease(ctx, "deploy", "A", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 { // a few tenures, as in the field report (fence 5 went back to 1)
		if _, err := st.ReleaseLease(ctx, "deploy", a.Holder); err != nil {
			t.Fatal(err)
		}
		if a, err = st.TryAcquireLease(ctx, "deploy", "A", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := st.Set(ctx, "k", 1)
	if err != nil {
		t.Fatal(err)
	}

	srv.Stop()
	srv.Restart() // empty
	var b state.Lease
	deadline := time.Now().Add(redistest.Wait)
	for { // the client reconnects by itself
		b, err = st.TryAcquireLease(ctx, "deploy", "B", time.Minute)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // waiting for the pool to reconnect
	}
	if err != nil {
		t.Fatal(err)
	}
	if b.Fence <= a.Fence {
		t.Errorf("after Redis lost its data the new holder got fence %d, not above the lost holder's %d", b.Fence, a.Fence)
	}
	v2, err := st.Set(ctx, "k", 2)
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version <= v1.Version {
		t.Errorf("after Redis lost its data a key got version %d, not above %d", v2.Version, v1.Version)
	}
	t.Logf("fence %d before the restart, %d after; version %d before, %d after", a.Fence, b.Fence, v1.Version, v2.Version)
}

// logRecords is a slog.Handler that sends every record's message to a
// channel.
type logRecords chan string

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	l <- r.Level.String() + " " + r.Message
	return nil
}
func (l logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logRecords) WithGroup(string) slog.Handler      { return l }

// TestStartupWarnsAboutARedisThatLosesData opens a store over a redis-server
// that persists nothing and evicts keys: the store's Logger gets a warning
// for each, saying how to fix it.
func TestStartupWarnsAboutARedisThatLosesData(t *testing.T) {
	redistest.URL(t)
	srv := redistest.Start(t, "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru")
	d, err := redisstate.Open(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	logs := make(logRecords, 16)
	st, err := state.New(d, &state.Options{SweepInterval: -1, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var got []string
	for len(got) < 2 {
		select {
		case m := <-logs:
			if strings.Contains(m, "configuration") {
				got = append(got, m)
			}
		case <-time.After(redistest.Wait):
			t.Fatalf("the store must warn about persistence and eviction when it starts; it logged %q", got)
		}
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{"WARN ", "persists nothing", "appendonly yes", "maxmemory-policy allkeys-lru", "maxmemory-policy noeviction", srv.Addr()} {
		if !strings.Contains(all, want) {
			t.Errorf("the warnings must say %q:\n%s", want, all)
		}
	}
	t.Logf("warnings:\n%s", all)
}
