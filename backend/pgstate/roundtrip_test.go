package pgstate_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/pgstate"
	"github.com/statesidecar/state/internal/pgtest"
	"github.com/statesidecar/state/statetest"
)

// opKey marks the context of the operation whose round trips are counted,
// so that the store's background work (reading the server's clock) is not.
type opKey struct{}

// tripCounter is a pgx tracer recording the queries, batches and prepares
// sent under a marked context (each is one round trip), and a count of the
// writes to the connections' sockets, which the tracer's count must match:
// pgx sends each request with one write, so a request the tracer missed
// would show there.
type tripCounter struct {
	mu     sync.Mutex
	on     atomic.Bool
	trips  []string
	writes atomic.Int64
}

func (c *tripCounter) record(ctx context.Context, what string) {
	if ctx.Value(opKey{}) == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trips = append(c.trips, what)
}

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.record(ctx, "query "+summary(d.SQL))
	return ctx
}

func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var parts []string
	for _, q := range d.Batch.QueuedQueries {
		parts = append(parts, summary(q.SQL))
	}
	c.record(ctx, "batch["+strings.Join(parts, "; ")+"]")
	return ctx
}

func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (c *tripCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, d pgx.TracePrepareStartData) context.Context {
	c.record(ctx, "prepare "+summary(d.SQL))
	return ctx
}

func (c *tripCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// summary shortens a statement to its first words.
func summary(sql string) string {
	f := strings.Fields(sql)
	if len(f) > 4 {
		f = f[:4]
	}
	return strings.Join(f, " ")
}

// countingConn counts the writes to a connection's socket while the counter
// is on.
type countingConn struct {
	net.Conn
	c *tripCounter
}

func (cc countingConn) Write(b []byte) (int, error) {
	if cc.c.on.Load() {
		cc.c.writes.Add(1)
	}
	return cc.Conn.Write(b)
}

// count runs op under a marked context and returns the round trips it made
// as the tracer saw them, and the socket writes.
func (c *tripCounter) count(t *testing.T, name string, op func(ctx context.Context) error) ([]string, int64) {
	t.Helper()
	c.mu.Lock()
	c.trips = nil
	c.mu.Unlock()
	c.writes.Store(0)
	c.on.Store(true)
	err := op(context.WithValue(context.Background(), opKey{}, name))
	c.on.Store(false)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.trips, c.writes.Load()
}

// TestFastOperationsAreOneRoundTrip counts, with a pgx tracer, the round
// trips of each store operation: set (with its history entry), get, lease
// acquire, renew and release, and a workflow claim and heartbeat must each
// be one, both with the
// database's clock (production) and with an injected clock (tests). Each
// operation runs once before it is counted, so that pgx has prepared its
// statement (a connection's first use of a statement costs one prepare
// round trip more, once).
func TestFastOperationsAreOneRoundTrip(t *testing.T) {
	for _, mode := range []string{"ServerClock", "InjectedClock"} {
		t.Run(mode, func(t *testing.T) {
			u := pgtest.URL(t)
			cfg, err := pgxpool.ParseConfig(u)
			if err != nil {
				t.Fatal(err)
			}
			c := &tripCounter{}
			cfg.ConnConfig.Tracer = c
			cfg.MaxConns = 1 // every operation on the connection whose statements are prepared
			dial := cfg.ConnConfig.DialFunc
			cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return countingConn{conn, c}, nil
			}
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			d, err := pgstate.New(ctx, pool, &pgstate.Options{Schema: pgtest.Schema(t, u)})
			if err != nil {
				t.Fatal(err)
			}
			opts := &state.Options{SweepInterval: -1}
			if mode == "InjectedClock" {
				opts.Clock = statetest.NewClock()
			}
			st, err := state.New(d, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var runs []string // each claim's run is a fresh one
			for range 3 {
				run, err := st.CreateRun(ctx, "job", nil)
				if err != nil {
					t.Fatal(err)
				}
				runs = append(runs, run.ID)
			}
			claimed := 0
			type op struct {
				name string
				op   func(ctx context.Context) error
			}
			fast := []op{
				{"set", func(ctx context.Context) error {
					_, err := st.Set(ctx, "k", "v", state.WithTTL(time.Minute))
					return err
				}},
				{"get", func(ctx context.Context) error { _, err := st.Get(ctx, "k"); return err }},
				{"acquire", func(ctx context.Context) error { _, err := st.TryAcquireLease(ctx, "r", "A", time.Minute); return err }},
				{"renew", func(ctx context.Context) error { _, err := st.RenewLease(ctx, "r", "A", time.Minute); return err }},
				{"release", func(ctx context.Context) error { _, err := st.ReleaseLease(ctx, "r", "A"); return err }},
				{"claim", func(ctx context.Context) error {
					c, err := st.ClaimRun(ctx, runs[claimed], "A")
					claimed++
					if err == nil && (c.Renewed || c.Attempt != 1) {
						t.Errorf("claim of a created run: %+v, want a fresh claim", c)
					}
					return err
				}},
				{"heartbeat (the holder claims again)", func(ctx context.Context) error {
					c, err := st.ClaimRun(ctx, runs[0], "A")
					if err == nil && !c.Renewed {
						t.Errorf("claim by the holder: %+v, want a heartbeat", c)
					}
					return err
				}},
			}
			// For the record: the operations that take package state's
			// read-modify-write path (Update: two round trips) and others.
			other := []op{
				{"checkpoint", func(ctx context.Context) error { _, err := st.CheckpointRun(ctx, runs[0], 1, "x"); return err }},
				{"create run", func(ctx context.Context) error { _, err := st.CreateRun(ctx, "job", nil); return err }},
				{"delete", func(ctx context.Context) error { _, err := st.Delete(ctx, "k"); return err }},
				{"list", func(ctx context.Context) error { _, err := st.List(ctx, ""); return err }},
				{"history", func(ctx context.Context) error {
					_, err := st.History(ctx, state.HistoryQuery{Key: "k"})
					return err
				}},
				{"health", func(ctx context.Context) error { _, err := st.Health(ctx); return err }},
			}
			for _, o := range fast {
				if err := o.op(ctx); err != nil { // prepare its statements
					t.Fatalf("%s: %v", o.name, err)
				}
			}
			for _, o := range fast {
				trips, writes := c.count(t, o.name, o.op)
				t.Logf("%s: %d round trip(s): %s (%d socket writes)", o.name, len(trips), strings.Join(trips, ", "), writes)
				if len(trips) != 1 || writes != 1 {
					t.Errorf("%s must be one round trip, made %d (%d socket writes): %s", o.name, len(trips), writes, strings.Join(trips, ", "))
				}
			}
			for _, o := range other {
				_, _ = c.count(t, o.name+" (warming)", o.op)
			}
			for _, o := range other {
				trips, writes := c.count(t, o.name, o.op)
				t.Logf("%s: %d round trip(s): %s (%d socket writes)", o.name, len(trips), strings.Join(trips, ", "), writes)
			}
		})
	}
}
