package filestate

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/statesidecar/state/backend/objstate"
)

// medium is an objstate.Medium over a directory: an object is a file (its
// key a path under the directory), its tag a hash of its bytes. A write
// goes to a temporary file first, is flushed to the disk and renamed into
// place, so that a reader sees the old file or the new one, whole; a
// conditional write does that holding an exclusive flock(2) on a lock file
// of its own, which every process sharing the directory takes, and which
// the kernel releases when a process dies.
type medium struct {
	dir   string
	fsync bool
}

// Reserved directories, never listed: temporary files and lock files.
const (
	tmpDir  = ".tmp"
	lockDir = ".locks"
)

func (m *medium) Name() string { return "file" }

func (m *medium) path(key string) string { return filepath.Join(m.dir, filepath.FromSlash(key)) }

// tagOf is a file's tag: 128 bits of hash of its bytes (two seeded
// runtime hashes, AES-based and many times faster than SHA-256 on a head of
// tens of KiB, which every check that the cache is current reads). Tags
// are compared within one process only (the medium's conditional writes
// check them against the file there and then), so a hash seeded per
// process serves.
func tagOf(b []byte) string {
	var out [16]byte
	binary.LittleEndian.PutUint64(out[:8], maphash.Bytes(tagSeeds[0], b))
	binary.LittleEndian.PutUint64(out[8:], maphash.Bytes(tagSeeds[1], b))
	return hex.EncodeToString(out[:])
}

var tagSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func (m *medium) Read(ctx context.Context, key, ifNoneMatch string) (objstate.Object, error) {
	if err := ctx.Err(); err != nil {
		return objstate.Object{}, err
	}
	b, err := os.ReadFile(m.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return objstate.Object{}, objstate.ErrNotExist
	}
	if err != nil {
		return objstate.Object{}, err
	}
	tag := tagOf(b)
	if ifNoneMatch != "" && tag == ifNoneMatch {
		return objstate.Object{}, objstate.ErrUnchanged
	}
	return objstate.Object{Data: b, Tag: tag}, nil
}

func (m *medium) Write(ctx context.Context, key string, data []byte, c objstate.Cond) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	final := m.path(key)
	tmp, err := m.temp(data)
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp) // once renamed, there is nothing to remove
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", err
	}
	if c != (objstate.Cond{}) {
		unlock, err := m.lock(ctx, key)
		if err != nil {
			return "", err
		}
		defer unlock()
		cur, err := os.ReadFile(final)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if c.IfMatch != "" {
				return "", objstate.ErrConditionFailed
			}
		case err != nil:
			return "", err
		case c.IfAbsent, tagOf(cur) != c.IfMatch:
			return "", objstate.ErrConditionFailed
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	if m.fsync {
		if err := syncDir(filepath.Dir(final)); err != nil {
			return "", err
		}
	}
	return tagOf(data), nil
}

// temp writes data to a new temporary file, flushed to the disk, and
// returns its path.
func (m *medium) temp(data []byte) (string, error) {
	dir := filepath.Join(m.dir, tmpDir)
	var b [8]byte
	_, _ = rand.Read(b[:])
	p := filepath.Join(dir, hex.EncodeToString(b[:]))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o755); err == nil {
			f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
	}
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil && m.fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
		return "", err
	}
	return p, nil
}

// lock takes the exclusive lock of key, waiting for another process that
// holds it (as long as ctx lets it), and returns the function that
// releases it. The wait blocks in the kernel, which wakes a waiter as soon
// as the lock is free: a waiter polling for it would lose it, again and
// again, to a busy process that takes it back at once.
func (m *medium) lock(ctx context.Context, key string) (func(), error) {
	p := filepath.Join(m.dir, lockDir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if ok, err := tryLock(f); ok || err != nil {
		if err != nil {
			f.Close()
			return nil, err
		}
		return func() { unlock(f); f.Close() }, nil
	}
	got := make(chan error, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		err := lockWait(f)
		mu.Lock()
		defer mu.Unlock()
		if abandoned { // the caller gave up: let the lock go at once
			if err == nil {
				unlock(f)
			}
			f.Close()
			return
		}
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			f.Close()
			return nil, err
		}
		return func() { unlock(f); f.Close() }, nil
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case err := <-got: // taken just now
			if err == nil {
				unlock(f)
			}
			f.Close()
		default:
			abandoned = true
		}
		return nil, fmt.Errorf("%w: waiting for the lock of %s: %w", objstate.ErrTransient, key, ctx.Err())
	}
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (m *medium) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := os.Remove(m.path(key))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// A snapshot's directory goes with its last part (Remove fails while
	// it holds others).
	if dir := path.Dir(key); path.Base(path.Dir(dir)) == "snap" {
		_ = os.Remove(m.path(dir))
	}
	return nil
}

func (m *medium) List(ctx context.Context, prefix string, fn func(objstate.ObjectInfo) bool) error {
	base := prefix[:strings.LastIndex(prefix, "/")+1]
	var infos []objstate.ObjectInfo
	err := filepath.WalkDir(m.path(base), func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(m.dir, p)
		key := filepath.ToSlash(rel)
		if e.IsDir() {
			if key == tmpDir || key == lockDir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		infos = append(infos, objstate.ObjectInfo{Key: key, Modified: info.ModTime(), Size: info.Size()})
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(infos, func(a, b objstate.ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	for _, i := range infos {
		if !fn(i) {
			break
		}
	}
	return nil
}

// Now is the machine's clock, which every process sharing the directory
// reads.
func (m *medium) Now() time.Time { return time.Now() }

func (m *medium) Close() error { return nil }

// cleanTemp removes temporary files older than an hour, left by processes
// that died while writing.
func (m *medium) cleanTemp() {
	dir := filepath.Join(m.dir, tmpDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
