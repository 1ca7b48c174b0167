// Package persistence holds Filigrane's two storage contracts and their backends.
//
// Store is an ordered key-value store with compare-and-set on an opaque version; it holds every durable record
// (organizations, keys, ledger, jobs, uploads, assets and their indexes). Blobs holds files: inputs, outputs and
// spooled uploads. Each contract has one backend for the embedded single-node mode (Pebble, the filesystem) and
// one for cluster mode (S3-compatible object storage). Every backend passes the same contract suite in
// persistence/storetest and persistence/blobtest.
//
// Backends:
//
//	pebblestore.Open(dir string, logger zerolog.Logger) (*pebblestore.Store, error)
//	fsblobs.Open(root string) (*fsblobs.Blobs, error)
//	s3store.New(client *minio.Client, bucket, prefix string) (*s3store.Store, error)
//	s3blobs.New(client *minio.Client, bucket, prefix string) (*s3blobs.Blobs, error)
//
// Records are encoded with Marshal/Unmarshal: msgpack with a schema version, where an unknown version is an
// error (ErrUnknownSchema), never a guess.
package persistence

import (
	"context"
	"errors"
	"io"
)

// ErrNotFound is returned when a key or blob does not exist.
var ErrNotFound = errors.New("persistence: not found")

// ErrVersionMismatch is returned by CompareAndSet and Delete when the stored version is not the expected one:
// another writer (or another activation of the same actor) got there first.
var ErrVersionMismatch = errors.New("persistence: version mismatch")

// Version identifies one written state of a key. It is opaque: a counter on Pebble, an ETag on object storage.
// The zero value NoVersion means "the key does not exist".
type Version string

// NoVersion is the expected version for create-only writes.
const NoVersion Version = ""

// Item is one key with its value and version.
type Item struct {
	Key     []byte
	Value   []byte
	Version Version
}

// Store is an ordered key-value store with optimistic concurrency. Writes are durable when they return.
type Store interface {
	// Get returns the value and version of key, or ErrNotFound.
	Get(ctx context.Context, key []byte) (Item, error)
	// CompareAndSet writes value if the current version of key equals expect (NoVersion: the key must not exist)
	// and returns the new version. Otherwise it returns ErrVersionMismatch and writes nothing.
	CompareAndSet(ctx context.Context, key []byte, expect Version, value []byte) (Version, error)
	// Delete removes key if its version equals expect. Deleting a missing key with NoVersion succeeds.
	Delete(ctx context.Context, key []byte, expect Version) error
	// Scan returns up to limit items whose keys start with prefix and are >= start (start empty: from the
	// beginning of the prefix), in ascending bytewise key order. limit must be positive: unbounded scans are
	// a memory hazard on large prefixes, so callers page with start = KeyAfter(last key).
	// A start below the prefix scans from the prefix; a start past the prefix returns nothing.
	Scan(ctx context.Context, prefix, start []byte, limit int) ([]Item, error)
	// Close releases the store. Calls after Close return an error; they do not panic.
	Close() error
}

// BlobInfo describes a stored blob.
type BlobInfo struct {
	Size   int64
	SHA256 string // lowercase hex
}

// Blobs stores immutable files by key. Keys are slash-separated relative paths: non-empty segments, no "." or
// ".." segments, no leading slash, no NUL or backslash (see ValidateBlobKey). Put on an existing key replaces it
// atomically: readers see the old blob or the new one, never a mix.
type Blobs interface {
	// Put streams r into key, replacing nothing half-written on failure, and returns its size and digest.
	Put(ctx context.Context, key string, r io.Reader) (BlobInfo, error)
	// Get opens key for reading from offset; length < 0 reads to the end. A range that runs past the end is cut
	// at the end; an offset at or past the end yields an empty reader. A negative offset is an error.
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	// Stat returns the size and digest of key, or ErrNotFound.
	Stat(ctx context.Context, key string) (BlobInfo, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}
