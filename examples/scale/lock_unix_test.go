//go:build unix

package main

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// -lock takes the file's lock (creating the file) while measuring and lets
// it go afterwards.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.lock")
	if err := run(t.Context(), []string{"-url", "mem://", "-sizes", "1000", "-ops", "10", "-lock", path}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no lock file: %v", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatalf("the lock is still held: %v", err)
	}
}
