package sqlitestate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// explainOpen adds to err, SQLite's "unable to open database file" after a
// failed open of path, what is wrong with the path when it can tell: the
// path is a directory, its directory is missing or is not a directory, or
// the directory or the file is not writable by this process. Otherwise it
// returns err as it is.
func explainOpen(path string, err error) error {
	why := openProblem(path)
	if why == "" {
		return err
	}
	return fmt.Errorf("%s: %w", why, err)
}

func openProblem(path string) string {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return "the path is a directory, not a database file"
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("directory %s does not exist (create it first)", dir)
	case err != nil:
		return fmt.Sprintf("directory %s: %v", dir, err)
	case !fi.IsDir():
		return fmt.Sprintf("%s is not a directory", dir)
	}
	// SQLite creates the file and, in WAL mode, the -wal and -shm files
	// beside it: the directory must be writable, and the file if it exists.
	probe, err := os.CreateTemp(dir, ".sqlitestate-probe-*")
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf("directory %s is not writable by this process (uid %d)", dir, os.Geteuid())
		}
		return fmt.Sprintf("directory %s: %v", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf("file %s is not writable by this process (uid %d)", path, os.Geteuid())
		}
	} else {
		f.Close()
	}
	return ""
}
