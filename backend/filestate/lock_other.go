//go:build !unix

package filestate

import (
	"errors"
	"os"
)

func tryLock(*os.File) (bool, error) {
	return false, errors.New("filestate: file locks (flock) are needed and this system has none")
}

func unlock(*os.File) {}

func lockWait(f *os.File) error { _, err := tryLock(f); return err }
