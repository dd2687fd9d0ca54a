package filestate_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/backend/filestate"
	"github.com/statesidecar/state/internal/benchvs"
)

// BenchmarkVsRaw measures the store's fast operations against the raw
// file operations of the same size in the same directory, at 1 and 32
// goroutines:
//
//	go test -run '^$' -bench VsRaw ./backend/filestate/
//
// The raw read is os.ReadFile of a small file. The raw write is a
// compare-and-swap of one file done as the store does its head's: take an
// flock, read the file and compare it with what the writer last read,
// write a temporary file, fsync it, rename it into place and fsync the
// directory; at 32 goroutines every writer makes that chain on the same
// file, reading it again when another got there first. Each benchmark
// alternates ten rounds of raw and store operations (b.N of each in all),
// and reports the store's ns/op, the raw one's (raw-ns/op) and the
// store's throughput as a fraction of raw (x-raw).
func BenchmarkVsRaw(b *testing.B) {
	for _, g := range []int{1, 32} {
		for _, bm := range []struct{ name, raw string }{
			{"Get", "read"},
			{"Set", "cas"},
			{"Claim", "cas"},
			{"Acquire", "cas"},
		} {
			b.Run(bm.name+"/goroutines="+strconv.Itoa(g), func(b *testing.B) {
				dir := b.TempDir()
				d, err := filestate.Open(context.Background(), filepath.Join(dir, "store"), nil)
				if err != nil {
					b.Fatal(err)
				}
				st, err := state.New(d, &state.Options{SweepInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				store := benchvs.StoreOp(b, st, bm.name)
				benchvs.VsRaw(b, g, rawFileOp(b, filepath.Join(dir, "raw"), bm.raw), store, nil)
			})
		}
	}
}

func rawFileOp(b *testing.B, dir, kind string) func(int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "obj")
	body := []byte(`{"n":1}`)
	if err := os.WriteFile(path, body, 0o644); err != nil {
		b.Fatal(err)
	}
	if kind == "read" {
		return func(int64) error { _, err := os.ReadFile(path); return err }
	}
	lockPath := filepath.Join(dir, "lock")
	if err := os.WriteFile(lockPath, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	return func(i int64) error {
		seen, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for {
			tmp := filepath.Join(dir, "tmp-"+strconv.FormatInt(i, 10))
			f, err := os.Create(tmp)
			if err != nil {
				return err
			}
			_, err = f.Write(append(body, strconv.FormatInt(i, 10)...))
			if err == nil {
				err = f.Sync()
			}
			f.Close()
			if err != nil {
				return err
			}
			lf2, err := os.OpenFile(lockPath, os.O_RDWR, 0) // a description of its own: flock excludes the other goroutines
			if err != nil {
				return err
			}
			if err := syscall.Flock(int(lf2.Fd()), syscall.LOCK_EX); err != nil {
				lf2.Close()
				return err
			}
			cur, err := os.ReadFile(path)
			if err == nil && bytes.Equal(cur, seen) {
				err = os.Rename(tmp, path)
				if err == nil {
					var df *os.File
					if df, err = os.Open(dir); err == nil {
						err = df.Sync()
						df.Close()
					}
				}
				_ = syscall.Flock(int(lf2.Fd()), syscall.LOCK_UN)
				lf2.Close()
				return err
			}
			_ = syscall.Flock(int(lf2.Fd()), syscall.LOCK_UN)
			lf2.Close()
			os.Remove(tmp)
			if err != nil {
				return err
			}
			seen = cur // another writer got there first: read again and retry
		}
	}
}
