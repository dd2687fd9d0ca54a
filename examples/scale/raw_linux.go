package main

import (
	"os"
	"strings"
	"syscall"
)

// hugeSlab returns n zero bytes of fresh memory outside the Go heap that
// the kernel is asked to back with 2 MB pages (MADV_HUGEPAGE, which
// transparent huge pages honour in their "madvise" setting), and whether it
// asked. It holds no pointers: the garbage collector does not scan it.
func hugeSlab(n int) ([]byte, bool, error) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, false, err
	}
	return b, syscall.Madvise(b, syscall.MADV_HUGEPAGE) == nil, nil
}

// freeSlab returns a slab of hugeSlab to the system.
func freeSlab(b []byte) error { return syscall.Munmap(b) }

// hugePages says how much of the process's memory the kernel backs with
// huge pages (AnonHugePages in /proc/self/smaps_rollup), or nothing.
func hugePages() string {
	b, err := os.ReadFile("/proc/self/smaps_rollup")
	if err != nil {
		return ""
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "AnonHugePages:"); ok {
			return ", huge pages " + strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}
