package sqlitestate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/internal/benchvs"
)

// BenchmarkPatternsVsPlain measures what the coordination patterns cost
// over the plain operation they extend, alternating ten rounds of each on
// one file so that both see the same machine load:
//
//	go test -run '^$' -bench PatternsVsPlain -benchtime 2000x -count 5 ./backend/sqlitestate/
//
// It reports the pattern's ns/op, the plain operation's (plain-ns/op) and
// the ratio (x-plain-cost): creating a child of a join parent against
// creating a run, creating with an idempotency key against without, and
// completing a child of a join parent (which reads the parent and its
// counters in the same transaction) against completing a run.
func BenchmarkPatternsVsPlain(b *testing.B) {
	ctx := context.Background()
	for _, bm := range []struct {
		name  string
		setup func(b *testing.B, e *benchEnv, n int) (pattern, plain func(int64) error)
	}{
		{"CreateChild", func(b *testing.B, e *benchEnv, n int) (func(int64) error, func(int64) error) {
			p, err := e.st.CreateRun(ctx, "aggregate", nil, state.WithJoin())
			if err != nil {
				b.Fatal(err)
			}
			return func(int64) error { _, err := e.st.CreateRun(ctx, "job", nil, state.WithParent(p.ID)); return err },
				func(int64) error { _, err := e.st.CreateRun(ctx, "job", nil); return err }
		}},
		{"CreateIdempotent", func(b *testing.B, e *benchEnv, n int) (func(int64) error, func(int64) error) {
			return func(i int64) error {
					_, err := e.st.CreateRun(ctx, "job", nil, state.WithIdempotencyKey(fmt.Sprint("req-", i)))
					return err
				},
				func(int64) error { _, err := e.st.CreateRun(ctx, "job", nil); return err }
		}},
		{"CompleteChild", func(b *testing.B, e *benchEnv, n int) (func(int64) error, func(int64) error) {
			p, err := e.st.CreateRun(ctx, "aggregate", nil, state.WithJoin())
			if err != nil {
				b.Fatal(err)
			}
			kids, plain := make([]string, n), make([]string, n)
			for i := range n {
				k, err := e.st.CreateRun(ctx, "job", nil, state.WithParent(p.ID))
				if err != nil {
					b.Fatal(err)
				}
				r, err := e.st.CreateRun(ctx, "job", nil)
				if err != nil {
					b.Fatal(err)
				}
				kids[i], plain[i] = k.ID, r.ID
			}
			return func(i int64) error { _, err := e.st.CompleteRun(ctx, kids[i]); return err },
				func(i int64) error { _, err := e.st.CompleteRun(ctx, plain[i]); return err }
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			e := newBenchEnv(b)
			pattern, plain := bm.setup(b, e, b.N)
			plainT, patT := benchvs.Alternate(b, 1, plain, pattern)
			b.ReportMetric(float64(patT.Nanoseconds())/float64(b.N), "ns/op")
			b.ReportMetric(float64(plainT.Nanoseconds())/float64(b.N), "plain-ns/op")
			b.ReportMetric(float64(patT)/float64(plainT), "x-plain-cost")
		})
	}
}
