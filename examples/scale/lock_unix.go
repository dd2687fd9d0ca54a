//go:build unix

package main

import (
	"os"
	"syscall"
)

// lockFile waits for an exclusive flock(2) on the file at path (created if
// need be), the lock flock(1) takes, and returns its release.
func lockFile(path string) (func() error, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return f.Close, nil // closing the file releases the lock
}
