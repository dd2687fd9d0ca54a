package sqlitestate

import (
	"context"
	"path/filepath"
	"testing"
)

// TestConnectionsReadThroughAMapAndACache checks that every connection,
// reading and writing, runs with the page cache and memory map its options
// say: the point reads of a large store depend on them.
func TestConnectionsReadThroughAMapAndACache(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		opts      *Options
		mmap, kib int64
	}{
		{nil, DefaultMmapSize, DefaultCacheKiB},
		{&Options{MmapSize: 1 << 20, CacheKiB: 100}, 1 << 20, 100},
		{&Options{MmapSize: -1}, 0, DefaultCacheKiB},
	} {
		d, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), c.opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, db := range []string{"reader", "writer"} {
			conn := d.r
			if db == "writer" {
				conn = d.w
			}
			var mmap, cache int64
			if err := conn.QueryRowContext(ctx, "PRAGMA mmap_size").Scan(&mmap); err != nil {
				t.Fatal(err)
			}
			if err := conn.QueryRowContext(ctx, "PRAGMA cache_size").Scan(&cache); err != nil {
				t.Fatal(err)
			}
			if mmap != c.mmap || cache != -c.kib {
				t.Errorf("%+v: %s connection has mmap_size %d and cache_size %d, want %d and %d", c.opts, db, mmap, cache, c.mmap, -c.kib)
			}
		}
		d.Close()
	}
}
