package sqlitestate

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestListQueriesAreIndexRangeScansBoundedOnBothSides proves, with SQLite's
// own EXPLAIN QUERY PLAN and EXPLAIN, that every statement List runs for a
// prefix (key-value listing, and the index walks of run discovery, which
// are keys-only listings of an index prefix) seeks into the primary key to
// its lower bound and stops at its upper bound: its cost is the page it
// returns, not the records before it. Two lower bounds (prefix and cursor)
// would let the planner seek to one and filter on the other, walking every
// record in between; the EXPLAIN check catches that.
func TestListQueriesAreIndexRangeScansBoundedOnBothSides(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, keysOnly := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			q := listSQL(keysOnly, after, true)
			t.Run(fmt.Sprintf("keysOnly=%v,after=%v", keysOnly, after), func(t *testing.T) {
				plan := queryPlan(t, d.r, q)
				want := "SEARCH state_records USING PRIMARY KEY (ns=? AND key>? AND key<?)"
				if len(plan) != 1 || plan[0] != want {
					t.Fatalf("plan of %s:\n%v\nwant one step: %s", q, plan, want)
				}
				seekBounds(t, d.r, q, 2, 3)
			})
		}
	}
	// GetMany (discovery reads a page of runs with it) searches the primary
	// key once per key.
	if plan := queryPlan(t, d.r, sqlGetMany); len(plan) < 1 || plan[0] != "SEARCH state_records USING PRIMARY KEY (ns=? AND key=?)" {
		t.Errorf("plan of GetMany: %v, want a primary-key search per key", plan)
	}
	// The statement Count runs for Health is bounded the same way.
	if plan := queryPlan(t, d.r, sqlCountBounded); len(plan) != 1 ||
		!strings.HasPrefix(plan[0], "SEARCH state_records USING ") || !strings.HasSuffix(plan[0], "(ns=? AND key>? AND key<?)") {
		t.Errorf("plan of the count: %v, want one bounded SEARCH of state_records", plan)
	}
}

// TestSeekBoundsCatchesAFilteredLowerBound checks the checker: the listing
// statement this package used before, with the cursor and the prefix as two
// lower bounds, seeks to one and filters on the other.
func TestSeekBoundsCatchesAFilteredLowerBound(t *testing.T) {
	ctx := context.Background()
	d, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	old := `SELECT key, rev, crev FROM state_records
		WHERE ns = ?1 AND key > ?2 AND key >= ?3 AND key < ?4 AND (expires_at IS NULL OR expires_at > ?5)
		ORDER BY key LIMIT ?6`
	if unused := unusedBounds(t, d.r, old, 2, 3, 4); len(unused) == 0 {
		t.Fatal("the old two-lower-bound listing passed the seek check")
	}
}

// queryPlan returns the detail column of EXPLAIN QUERY PLAN q.
func queryPlan(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args(q)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return out
}

// seekBounds fails unless every parameter in bounds is a key of the
// statement's seek or of its end-of-range check.
func seekBounds(t *testing.T, db *sql.DB, q string, bounds ...int) {
	t.Helper()
	if unused := unusedBounds(t, db, q, bounds...); len(unused) > 0 {
		t.Errorf("parameters %v of %s bound no seek: the scan filters on them instead", unused, q)
	}
}

// unusedBounds returns the parameters of bounds that EXPLAIN q loads into a
// register that no Seek or Idx comparison of the primary key reads.
func unusedBounds(t *testing.T, db *sql.DB, q string, bounds ...int) []int {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+q, args(q)...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type op struct {
		name       string
		p1, p2, p3 int
		p4         sql.NullString
	}
	var ops []op
	for rows.Next() {
		var o op
		var addr, p5 int
		var comment any
		if err := rows.Scan(&addr, &o.name, &o.p1, &o.p2, &o.p3, &o.p4, &p5, &comment); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o)
	}
	var unused []int
	for _, b := range bounds {
		used, loaded := false, false
		for i, o := range ops {
			if o.name != "Variable" || o.p1 != b {
				continue
			}
			loaded = true
			reg := o.p2
			for _, s := range ops[i+1:] {
				if !strings.HasPrefix(s.name, "Seek") && !strings.HasPrefix(s.name, "Idx") {
					continue
				}
				var n int
				if _, err := fmt.Sscan(s.p4.String, &n); err == nil && reg >= s.p3 && reg < s.p3+n {
					used = true
				}
			}
		}
		if loaded && !used {
			unused = append(unused, b)
		}
	}
	return unused
}

// args returns placeholder arguments for every numbered parameter of q.
func args(q string) []any {
	n := 0
	for i := 1; i <= 9; i++ {
		if strings.Contains(q, fmt.Sprintf("?%d", i)) {
			n = i
		}
	}
	if n == 0 {
		n = strings.Count(q, "?")
	}
	out := make([]any, n)
	for i := range out {
		out[i] = "x"
	}
	return out
}
