package objstate

import (
	"context"
	"errors"
	"time"
)

// A Medium stores objects: byte strings under keys, each with a tag that
// changes whenever the object is written (an S3 ETag, a hash of a file).
// It is all the driver needs of an object store or a directory, so that
// one design serves both (packages s3state and filestate). Its methods must
// be safe for concurrent use, by several processes sharing the medium.
//
// The driver relies on these promises, which S3 has kept since 2020 and a
// local file system keeps: a read sees every write that returned before it
// began (strong read-after-write), a conditional write is atomic (of racing
// writes conditioned on the same tag at most one succeeds), and a list sees
// every object written before it began. It never asks for a conditional
// delete: S3 servers that accept one do not all make it atomic against a
// conditional write.
type Medium interface {
	// Name is the driver's name for this medium, such as "s3" or "file".
	Name() string

	// Read returns the object at key. When ifNoneMatch is not empty and the
	// object's tag equals it, Read returns ErrUnchanged instead (a cheap
	// check that a copy is current). An absent object gives ErrNotExist.
	Read(ctx context.Context, key, ifNoneMatch string) (Object, error)

	// Write stores data at key under cond and returns the object's new tag.
	// A condition that does not hold gives ErrConditionFailed and writes
	// nothing. An error matching ErrTransient says that the write may or
	// may not have happened and could succeed if tried again; any other
	// error says that it did not happen.
	Write(ctx context.Context, key string, data []byte, cond Cond) (tag string, err error)

	// Delete removes the object at key, whether or not it exists.
	Delete(ctx context.Context, key string) error

	// List calls fn for each object whose key starts with prefix, in
	// ascending byte order of key, until fn returns false.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) bool) error

	// Now returns the medium's clock, the one every process sharing the
	// medium agrees on: the server's for S3, the machine's for a directory.
	Now() time.Time

	// Close releases the medium's resources.
	Close() error
}

// An Object is what Medium.Read returns.
type Object struct {
	Data []byte
	// Tag identifies this version of the object (an ETag).
	Tag string
}

// ObjectInfo describes a listed object.
type ObjectInfo struct {
	Key string
	// Modified is when the object was written, by the medium's clock.
	Modified time.Time
	Size     int64
}

// Cond is the condition of a Medium.Write. The zero Cond writes
// unconditionally.
type Cond struct {
	// IfAbsent writes only if no object is at the key (If-None-Match: *).
	IfAbsent bool
	// IfMatch, when set, writes only if the object's tag equals it.
	IfMatch string
}

// Errors of a Medium.
var (
	// ErrNotExist: no object at the key.
	ErrNotExist = errors.New("objstate: no such object")
	// ErrUnchanged: the object's tag equals Read's ifNoneMatch.
	ErrUnchanged = errors.New("objstate: object unchanged")
	// ErrConditionFailed: a Write's condition did not hold.
	ErrConditionFailed = errors.New("objstate: write condition failed")
	// ErrTransient marks an error after which a request may be tried
	// again: a timeout, a lost connection, a busy or conflicting server.
	ErrTransient = errors.New("objstate: transient medium error")
)
