package redisstate_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/redisstate"
	"github.com/statesidecar/state/internal/redistest"
	"github.com/statesidecar/state/statetest"
)

// opKey marks the context of the operation whose commands are counted, so
// that the store's background work (reading the server's clock) is not.
type opKey struct{}

// commandCounter is a go-redis hook recording the commands and pipelines
// sent under a marked context: each is one round trip.
type commandCounter struct {
	mu    sync.Mutex
	trips []string
}

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.record(ctx, cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.record(ctx, "pipeline")
		return next(ctx, cmds)
	}
}

func (c *commandCounter) record(ctx context.Context, name string) {
	if ctx.Value(opKey{}) == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips = append(c.trips, name)
}

// count runs op under a marked context and returns the round trips it made.
func (c *commandCounter) count(t *testing.T, name string, op func(ctx context.Context) error) []string {
	t.Helper()
	c.mu.Lock()
	c.trips = nil
	c.mu.Unlock()
	if err := op(context.WithValue(context.Background(), opKey{}, name)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips
}

// TestEveryFastOperationIsOneRoundTrip counts, with a go-redis hook, the
// commands each store operation sends: set, get, claim, acquire, renew and
// release must each be one, both with Redis's clock (production) and with
// an injected clock (tests).
func TestEveryFastOperationIsOneRoundTrip(t *testing.T) {
	for _, mode := range []string{"ServerClock", "InjectedClock"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			d, err := redisstate.Open(ctx, withParams(redistest.URL(t), "prefix="+redistest.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = redistest.Purge(ctx, sharedClient(t), d.Prefix()) })
			// Open a few connections first: a command that has to dial also
			// makes the connection's handshake round trip, which belongs to
			// the connection, not to the operation.
			var wg sync.WaitGroup
			for range 4 {
				wg.Go(func() { _ = d.Client().Ping(ctx).Err() })
			}
			wg.Wait()
			c := &commandCounter{}
			d.Client().AddHook(c)
			opts := &state.Options{SweepInterval: -1}
			if mode == "InjectedClock" {
				opts.Clock = statetest.NewClock()
			}
			st, err := state.New(d, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			// The first write of a process to a namespace also registers the
			// namespace for sweeping (one SADD, once).
			first := c.count(t, "first set", func(ctx context.Context) error { _, err := st.Set(ctx, "warm", 1); return err })
			if len(first) != 2 || first[0] != "sadd" {
				t.Errorf("the first write of a namespace should register it and write: got %v", first)
			}
			run, err := st.CreateRun(ctx, "job", nil)
			if err != nil {
				t.Fatal(err)
			}
			ops := []struct {
				name string
				op   func(ctx context.Context) error
			}{
				{"set", func(ctx context.Context) error {
					_, err := st.Set(ctx, "k", "v", state.WithTTL(time.Minute))
					return err
				}},
				{"get", func(ctx context.Context) error { _, err := st.Get(ctx, "k"); return err }},
				{"claim", func(ctx context.Context) error { _, err := st.ClaimRun(ctx, run.ID, "A"); return err }},
				{"claim again (heartbeat)", func(ctx context.Context) error { _, err := st.ClaimRun(ctx, run.ID, "A"); return err }},
				{"acquire", func(ctx context.Context) error { _, err := st.TryAcquireLease(ctx, "r", "A", time.Minute); return err }},
				{"renew", func(ctx context.Context) error { _, err := st.RenewLease(ctx, "r", "A", time.Minute); return err }},
				{"release", func(ctx context.Context) error { _, err := st.ReleaseLease(ctx, "r", "A"); return err }},
			}
			for _, o := range ops {
				trips := c.count(t, o.name, o.op)
				t.Logf("%s: %s", o.name, strings.Join(trips, ", "))
				if len(trips) != 1 {
					t.Errorf("%s must be one round trip, made %d: %s", o.name, len(trips), strings.Join(trips, ", "))
				}
			}
			// For the record: the operations that take package state's
			// portable read-then-commit path.
			for _, o := range []struct {
				name string
				op   func(ctx context.Context) error
			}{
				{"create run", func(ctx context.Context) error { _, err := st.CreateRun(ctx, "job", nil); return err }},
				{"checkpoint", func(ctx context.Context) error { _, err := st.CheckpointRun(ctx, run.ID, 1, "x"); return err }},
				{"delete", func(ctx context.Context) error { _, err := st.Delete(ctx, "k"); return err }},
				{"health", func(ctx context.Context) error { _, err := st.Health(ctx); return err }},
			} {
				trips := c.count(t, o.name, o.op)
				t.Logf("%s: %d round trips (%s)", o.name, len(trips), strings.Join(trips, ", "))
			}
		})
	}
}

// withParams adds query parameters to a URL.
func withParams(u string, params ...string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + strings.Join(params, "&")
}
