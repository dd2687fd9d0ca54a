package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/google/btree"
)

// The raw engines (-raw) are the data structures under the memory backend,
// alone: a Go map from key to value and a B-tree of keys (google/btree, of
// the memory backend's degree); beside them, for what another layout would
// buy, B+trees built once from the sorted keys (one with a node in one
// allocation, one with the keys' bytes packed in its blocks, in the heap and
// in huge pages) and a sorted slice. Each holds one entry per record, with
// the keys of the store's key-value entries ("k/user/<group>/<nn>") and their
// values. They are timed as the store is, with the same random
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

// packTree is a B+tree built once from sorted keys in one slab of bytes of
// its own: each node a fixed block holding its keys' bytes inline (up to
// 23 bytes each) and its children as block numbers, so that a seek reads
// only the blocks on its path, and no key elsewhere. Built twice: in the Go
// heap, and in memory the kernel is asked to back with huge pages
// (hugeSlab), to tell the packing's share from the pages'.
type packTree struct {
	b    []byte
	root uint32
	huge bool // the slab is outside the heap (freed by close)
}

// A block: n (2 bytes), a leaf flag, the next leaf (4 bytes, packNone at
// the last), the children (4 bytes each), then the keys, packSlot bytes
// each: the key's bytes, zero-padded, and its length in the last byte.
const (
	packFan   = 64
	packSlot  = 24
	packKids  = 8
	packKeys  = packKids + 4*packFan
	packBlock = 2048
	packNone  = ^uint32(0)
)

func (t *packTree) block(i uint32) []byte { return t.b[int(i)*packBlock : int(i+1)*packBlock] }

func packKey(b []byte, j int) []byte {
	s := b[packKeys+j*packSlot:]
	return s[:s[packSlot-1]]
}

func packN(b []byte) int { return int(binary.LittleEndian.Uint16(b)) }

// buildPack builds the tree of sorted keys, three quarters full, in a slab
// from alloc.
func buildPack(sorted []string, alloc func(int) ([]byte, error)) (*packTree, error) {
	per := packFan * 3 / 4
	blocks, width := 0, len(sorted)
	for {
		width = (width + per - 1) / per
		blocks += width
		if width == 1 {
			break
		}
	}
	b, err := alloc(blocks * packBlock)
	if err != nil {
		return nil, err
	}
	t := &packTree{b: b}
	next := uint32(0)
	put := func(blk []byte, j int, k string) {
		if len(k) >= packSlot {
			panic("packTree: key too long")
		}
		slot := blk[packKeys+j*packSlot:]
		copy(slot, k)
		slot[packSlot-1] = byte(len(k))
	}
	var level []uint32 // the blocks of the level just built
	for i := 0; i < len(sorted); i += per {
		blk := t.block(next)
		keys := sorted[i:min(i+per, len(sorted))]
		for j, k := range keys {
			put(blk, j, k)
		}
		binary.LittleEndian.PutUint16(blk, uint16(len(keys)))
		blk[2] = 1
		binary.LittleEndian.PutUint32(blk[4:], packNone)
		if len(level) > 0 {
			binary.LittleEndian.PutUint32(t.block(level[len(level)-1])[4:], next)
		}
		level = append(level, next)
		next++
	}
	for len(level) > 1 {
		var up []uint32
		for i := 0; i < len(level); i += per {
			blk := t.block(next)
			kids := level[i:min(i+per, len(level))]
			for j, c := range kids {
				put(blk, j, string(packKey(t.block(c), 0)))
				binary.LittleEndian.PutUint32(blk[packKids+4*j:], c)
			}
			binary.LittleEndian.PutUint16(blk, uint16(len(kids)))
			up = append(up, next)
			next++
		}
		level = up
	}
	t.root = level[0]
	return t, nil
}

// seek returns the leaf and position of the first key at or above k.
func (t *packTree) seek(k []byte) (uint32, int) {
	i := t.root
	for {
		blk := t.block(i)
		n := packN(blk)
		// the first key above k (in a leaf, at or above)
		leaf := blk[2] == 1
		lo, hi := 0, n
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			c := bytes.Compare(packKey(blk, m), k)
			if c < 0 || (c == 0 && !leaf) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if leaf {
			return i, lo
		}
		i = binary.LittleEndian.Uint32(blk[packKids+4*max(lo-1, 0):])
	}
}

// page reads up to rawPage keys under prefix after after.
func (t *packTree) page(prefix, after string) [][]byte {
	p, a := []byte(prefix), []byte(after)
	l, i := t.seek([]byte(max(prefix, after)))
	var got [][]byte
	for len(got) < rawPage {
		blk := t.block(l)
		if i == packN(blk) {
			if l = binary.LittleEndian.Uint32(blk[4:]); l == packNone {
				break
			}
			i = 0
			continue
		}
		k := packKey(blk, i)
		i++
		if bytes.Equal(k, a) {
			continue
		}
		if !bytes.HasPrefix(k, p) {
			break
		}
		got = append(got, k)
	}
	return got
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
	pack   *packTree // in the heap
	huge   *packTree // in huge pages, when the system grants them
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
func (e *rawEngines) growTo(n int) error {
	for i := e.n; i < n; i++ {
		k := rawKey(i)
		v, _ := json.Marshal(valueOf(i))
		e.m[k] = v
		e.tree.ReplaceOrInsert(rawItem{k, v})
		e.sorted = append(e.sorted, k)
	}
	e.n = n
	e.flat = buildFlat(e.sorted)
	var err error
	if e.pack, err = buildPack(e.sorted, func(n int) ([]byte, error) { return make([]byte, n), nil }); err != nil {
		return err
	}
	if e.huge != nil {
		if err := freeSlab(e.huge.b); err != nil {
			return err
		}
	}
	var asked bool
	e.huge, err = buildPack(e.sorted, func(n int) ([]byte, error) {
		b, ok, err := hugeSlab(n)
		asked = ok
		return b, err
	})
	if err == nil && !asked {
		e.huge = nil
	}
	return err
}

// rawPage is how many keys a listing reads: a page of 20 and one more, as
// the store's List asks its backend for.
const rawPage = 21

// rawSink keeps the results of the timed calls alive.
var rawSink int

// operations returns the timed operations on the engines at their size.
func (e *rawEngines) operations() []operation {
	rng := rand.New(rand.NewPCG(uint64(e.n), 42))
	keys := drawNames(rng, e.n, rawKey)
	groups := drawNames(rng, e.n/100, func(g int) string { return "k/" + groupPrefix(g) })
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
		{name: "B+tree, keys packed in its blocks: first page (21 keys)", prepare: groups, call: func(_ context.Context, i int, prep any) error {
			return e.checkN(len(e.pack.page(prep.([]string)[i], "")))
		}},
		{name: "B+tree, keys packed in its blocks: later page (21 keys)", prepare: cursors, call: func(_ context.Context, i int, prep any) error {
			a := prep.([]listAt)[i]
			return e.checkN(len(e.pack.page(a.prefix, a.cursor)))
		}},
		{name: "the same in huge pages: first page (21 keys)", prepare: groups, call: func(_ context.Context, i int, prep any) error {
			if e.huge == nil {
				return errNoHugePages
			}
			return e.checkN(len(e.huge.page(prep.([]string)[i], "")))
		}},
		{name: "the same in huge pages: later page (21 keys)", prepare: cursors, call: func(_ context.Context, i int, prep any) error {
			if e.huge == nil {
				return errNoHugePages
			}
			a := prep.([]listAt)[i]
			return e.checkN(len(e.huge.page(a.prefix, a.cursor)))
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
func (e *rawEngines) check(got []string) error { return e.checkN(len(got)) }

func (e *rawEngines) checkN(n int) error {
	if n != rawPage {
		return fmt.Errorf("read %d keys, want %d", n, rawPage)
	}
	rawSink += n
	return nil
}

var errNoHugePages = errors.New("the system does not grant huge pages (MADV_HUGEPAGE)")

// runRaw grows the raw engines to each size and times them there.
func runRaw(ctx context.Context, o options, stdout, stderr io.Writer) error {
	e := newRawEngines()
	var cols []column
	for _, n := range o.sizes {
		start := time.Now()
		if err := e.growTo(n); err != nil {
			return err
		}
		filled := time.Since(start)
		fmt.Fprintf(stderr, "scale: raw engines at %d entries in %v%s; measuring\n", n, filled.Round(time.Millisecond), hugePages())
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
