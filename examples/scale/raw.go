package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
)

// The raw engines (-raw) are the data structures under the memory backend,
// alone: a Go map from key to value, a B-tree of keys (google/btree, of the
// memory backend's degree) and a sorted slice, each holding one entry per
// record, with the keys of the store's key-value entries ("k/user/<group>/<nn>")
// and their values. They are timed as the store is, with the same random
// draws, so that the ratio of their cost at the largest size to that at the
// smallest shows what the machine's memory charges any engine for a larger
// working set: the floor under the store's own ratios.

// flatNode is a node of a B+tree built once from sorted keys, each node one
// allocation holding its keys (and its children, or in a leaf the next
// leaf) inline: what a seek costs when a level is one block of memory
// instead of google/btree's three (the node, its items, its children).
type flatNode struct {
	n    int
	keys [flatFanout]string
	kids [flatFanout]*flatNode // nil in a leaf
	next *flatNode             // the next leaf
}

// flatFanout is the keys a node holds; nodes are built three quarters full.
const flatFanout = 64

// buildFlat builds the B+tree of sorted keys: leaves of keys, and above
// them nodes of each child's first key.
func buildFlat(sorted []string) *flatNode {
	per := flatFanout * 3 / 4
	var level []*flatNode
	for i := 0; i < len(sorted); i += per {
		l := &flatNode{}
		l.n = copy(l.keys[:], sorted[i:min(i+per, len(sorted))])
		if len(level) > 0 {
			level[len(level)-1].next = l
		}
		level = append(level, l)
	}
	for len(level) > 1 {
		var up []*flatNode
		for i := 0; i < len(level); i += per {
			p := &flatNode{}
			for _, c := range level[i:min(i+per, len(level))] {
				p.keys[p.n], p.kids[p.n] = c.keys[0], c
				p.n++
			}
			up = append(up, p)
		}
		level = up
	}
	return level[0]
}

// seek returns the leaf and position of the first key at or above k.
func (t *flatNode) seek(k string) (*flatNode, int) {
	n := t
	for n.kids[0] != nil {
		// the last child whose first key is at or below k
		i, _ := slices.BinarySearch(n.keys[:n.n], k)
		if i == n.n || n.keys[i] != k {
			i--
		}
		n = n.kids[max(i, 0)]
	}
	i, _ := slices.BinarySearch(n.keys[:n.n], k)
	return n, i
}

// rawItem is a B-tree entry: a key and its value.
type rawItem struct {
	key string
	v   []byte
}

// rawEngines are the three structures, grown together.
type rawEngines struct {
	n      int
	m      map[string][]byte
	tree   *btree.BTreeG[rawItem]
	sorted []string
	flat   *flatNode
}

func newRawEngines() *rawEngines {
	return &rawEngines{
		m:    map[string][]byte{},
		tree: btree.NewG(32, func(a, b rawItem) bool { return a.key < b.key }),
	}
}

// rawKey is the i-th key as the store holds it.
func rawKey(i int) string { return "k/" + keyName(i) }

// growTo adds entries until each structure holds n, in key order, as the
// filler writes them.
func (e *rawEngines) growTo(n int) {
	for i := e.n; i < n; i++ {
		k := rawKey(i)
		v, _ := json.Marshal(valueOf(i))
		e.m[k] = v
		e.tree.ReplaceOrInsert(rawItem{k, v})
		e.sorted = append(e.sorted, k)
	}
	e.n = n
	e.flat = buildFlat(e.sorted)
}

// rawPage is how many keys a listing reads: a page of 20 and one more, as
// the store's List asks its backend for.
const rawPage = 21

// rawSink keeps the results of the timed calls alive.
var rawSink int

// operations returns the timed operations on the engines at their size.
func (e *rawEngines) operations() []operation {
	rng := rand.New(rand.NewPCG(uint64(e.n), 42))
	keys := func(_ context.Context, n int) (any, error) {
		out := make([]string, n)
		for i := range out {
			out[i] = rawKey(rng.IntN(e.n))
		}
		return out, nil
	}
	groups := func(_ context.Context, n int) (any, error) {
		out := make([]string, n)
		for i := range out {
			out[i] = "k/" + groupPrefix(rng.IntN(e.n/100))
		}
		return out, nil
	}
	// cursors are a group's 60th key, where the harness's later page starts.
	cursors := func(_ context.Context, n int) (any, error) {
		out := make([]listAt, n)
		for i := range out {
			g := rng.IntN(e.n / 100)
			out[i] = listAt{"k/" + groupPrefix(g), rawKey(g*100 + 59)}
		}
		return out, nil
	}
	treePage := func(prefix, after string) error {
		var got []string
		e.tree.AscendGreaterOrEqual(rawItem{key: max(prefix, after)}, func(it rawItem) bool {
			if it.key == after {
				return true
			}
			if !strings.HasPrefix(it.key, prefix) {
				return false
			}
			got = append(got, it.key)
			return len(got) < rawPage
		})
		return e.check(got)
	}
	slicePage := func(prefix, after string) error {
		from := max(prefix, after)
		i, found := slices.BinarySearch(e.sorted, from)
		if found && from == after {
			i++
		}
		var got []string
		for ; i < len(e.sorted) && len(got) < rawPage && strings.HasPrefix(e.sorted[i], prefix); i++ {
			got = append(got, e.sorted[i])
		}
		return e.check(got)
	}
	flatPage := func(prefix, after string) error {
		from := max(prefix, after)
		l, i := e.flat.seek(from)
		var got []string
		for l != nil && len(got) < rawPage {
			if i == l.n {
				l, i = l.next, 0
				continue
			}
			k := l.keys[i]
			i++
			if k == after {
				continue
			}
			if !strings.HasPrefix(k, prefix) {
				break
			}
			got = append(got, k)
		}
		return e.check(got)
	}
	return []operation{
		{name: "map: read and copy a value", prepare: keys, call: func(_ context.Context, i int, prep any) error {
			v, ok := e.m[prep.([]string)[i]]
			if !ok {
				return fmt.Errorf("key not found")
			}
			rawSink += len(append([]byte(nil), v...))
			return nil
		}},
		{name: "B-tree: first page (21 keys)", prepare: groups, call: func(_ context.Context, i int, prep any) error {
			return treePage(prep.([]string)[i], "")
		}},
		{name: "B-tree: later page (21 keys)", prepare: cursors, call: func(_ context.Context, i int, prep any) error {
			a := prep.([]listAt)[i]
			return treePage(a.prefix, a.cursor)
		}},
		{name: "B+tree, a node one allocation: first page (21 keys)", prepare: groups, call: func(_ context.Context, i int, prep any) error {
			return flatPage(prep.([]string)[i], "")
		}},
		{name: "B+tree, a node one allocation: later page (21 keys)", prepare: cursors, call: func(_ context.Context, i int, prep any) error {
			a := prep.([]listAt)[i]
			return flatPage(a.prefix, a.cursor)
		}},
		{name: "sorted slice: first page (21 keys)", prepare: groups, call: func(_ context.Context, i int, prep any) error {
			return slicePage(prep.([]string)[i], "")
		}},
		{name: "sorted slice: later page (21 keys)", prepare: cursors, call: func(_ context.Context, i int, prep any) error {
			a := prep.([]listAt)[i]
			return slicePage(a.prefix, a.cursor)
		}},
	}
}

// check counts a page's keys into rawSink and reports a short one (every
// group holds 100 keys, and a later page starts at the 60th).
func (e *rawEngines) check(got []string) error {
	if len(got) != rawPage {
		return fmt.Errorf("read %d keys, want %d", len(got), rawPage)
	}
	rawSink += len(got)
	return nil
}

// runRaw grows the raw engines to each size and times them there.
func runRaw(ctx context.Context, o options, stdout, stderr io.Writer) error {
	e := newRawEngines()
	var cols []column
	for _, n := range o.sizes {
		start := time.Now()
		e.growTo(n)
		filled := time.Since(start)
		fmt.Fprintf(stderr, "scale: raw engines at %d entries in %v; measuring\n", n, filled.Round(time.Millisecond))
		var res []result
		err := withLock(o.lock, stderr, func() error {
			var err error
			res, err = timeOps(ctx, e.operations(), o.ops)
			return err
		})
		if err != nil {
			return fmt.Errorf("at %d entries: %w", n, err)
		}
		cols = append(cols, column{size: n, results: res, bytes: -1, fill: filled})
	}
	return report(stdout, cols)
}
