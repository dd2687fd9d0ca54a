package pgstate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/pgtest"
)

// plans collects the plans auto_explain reports to the client as notices,
// one per statement the server runs, nested ones (inside the store's
// functions) included.
type plans struct {
	mu   sync.Mutex
	on   bool
	seen []string
}

func (p *plans) notice(_ *pgconn.PgConn, n *pgconn.Notice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on && strings.Contains(n.Message, "Query Text:") {
		p.seen = append(p.seen, n.Message)
	}
}

// record switches collecting on or off, and returns what was collected.
func (p *plans) record(on bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on = on
	seen := p.seen
	p.seen = nil
	return seen
}

// TestWritesReadByKeyWithoutStatistics checks, with auto_explain reporting
// the plan of every statement the server runs, nested ones included, that
// GetMany and a commit with conditions, a put, a delete and an event find
// their records by key in a namespace grown from 40 to 20,000 records that
// were never analyzed (a server whose autovacuum is off, or between its
// runs), after the connection kept generic plans made while it was small:
// such a plan read the whole namespace by ns and joined it, so that each
// such write cost more as the namespace grew (2 ms at 20,000 records).
func TestWritesReadByKeyWithoutStatistics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), pgtest.Wait)
	defer cancel()
	u := pgtest.URL(t)
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := pgx.ConnectConfig(ctx, cfg.ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	_, err = probe.Exec(ctx, `LOAD 'auto_explain'`)
	_ = probe.Close(ctx)
	if err != nil {
		t.Skipf("auto_explain cannot be loaded here (it needs a superuser and PostgreSQL's contrib modules): %v", err)
	}
	p := &plans{}
	cfg.ConnConfig.OnNotice = p.notice
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;
			SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice`)
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	d, err := New(ctx, pool, &Options{Schema: pgtest.Schema(t, u)})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "nostats"
	at := time.Now()
	commit := func(from int) {
		t.Helper()
		for i := from; i < from+20; i += 2 { // past the five custom plans PL/pgSQL makes before it may keep a generic one
			k1, k2 := fmt.Sprintf("k/%08d", i), fmt.Sprintf("k/%08d", i+1)
			if recs, err := d.GetMany(ctx, &backend.GetQuery{NS: ns, Keys: []string{k1, k2}}); err != nil ||
				len(recs) != 2 || recs[0].Revision != int64(i) {
				t.Fatalf("GetMany %d: %+v, %v", i, recs, err)
			}
			res, err := d.Commit(ctx, &backend.Txn{NS: ns,
				If: []backend.Cond{{Key: k1, Revision: int64(i)}, {Key: k2, Revision: int64(i + 1)}},
				Then: []backend.Op{
					{Kind: backend.OpPut, Key: k1, Value: []byte(`"a"`), Writer: "w", Time: at},
					{Kind: backend.OpDelete, Key: k2},
				},
				Events: []backend.Event{{Key: k1, Op: "kv.set", Value: []byte(`"a"`), PrevOf: k1, Writer: "w", Time: at}},
			})
			if err != nil || !res.Committed {
				t.Fatalf("commit %d: %+v, %v", i, res, err)
			}
		}
	}
	// Plans made while the namespace is small, and kept, must still find
	// keys by key when it has grown.
	insert := func(from, to int) { // records k/<i> at revision i, straight into the table, not analyzed
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO `+d.q.s+`.records (ns, key, value, writer, rev, crev, updated_at)
			SELECT $1, convert_to('k/' || lpad(i::text, 8, '0'), 'UTF8'), '"v"', 'w', i, i, 0
			  FROM generate_series($2::integer, $3::integer) AS i`, ns, from, to); err != nil {
			t.Fatal(err)
		}
	}
	insert(1, 40)
	commit(1)
	insert(41, 20000)
	p.record(true)
	commit(100)
	seen := p.record(false)
	if len(seen) == 0 {
		t.Fatal("auto_explain reported no plans")
	}
	for _, plan := range seen {
		for _, bad := range []string{"Seq Scan on records", "Bitmap Heap Scan on records", "Hash Join", "Merge Join"} {
			if strings.Contains(plan, bad) {
				t.Errorf("a statement reads the whole namespace (%s):\n%s", bad, plan)
			}
		}
	}
}
