// Package syncbuf is a bytes.Buffer that several goroutines may write and
// read at once: the tests and examples collect a child process's stderr or
// a logger's output in it while they read what came so far.
package syncbuf

import (
	"bytes"
	"sync"
)

// A Buffer collects what is written to it, safe for concurrent use. The
// zero Buffer is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
