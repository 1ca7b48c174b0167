// Package pebblestore implements persistence.Store on an embedded Pebble database: the record store of the
// single-node mode and each cluster node's local state.
//
// Every write is synced to the write-ahead log before it returns. Pebble has no compare-and-set, so writes to
// one key are serialized by a lock stripe chosen from the key's hash, and the read-check-write happens under
// it; writes to different keys still proceed in parallel and share WAL syncs (Pebble groups concurrent
// commits).
//
// Layout. User keys live under a one-byte namespace (dataNS) so that the store's own metadata (metaNS) never
// shows up in a scan. A value is stored as an 8-byte big-endian version followed by the caller's bytes. The
// version comes from one counter for the whole store, not one per key: after a delete and re-create, a key never
// gets back a version it had before, so a writer holding a version from before the delete cannot succeed by
// accident (the ABA problem). The counter is persisted in blocks (see allocator) so that a write costs one
// synced batch, not two.
package pebblestore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/rs/zerolog"

	"filigrane/persistence"
)

const (
	metaNS byte = 0x00
	dataNS byte = 0x01

	versionLen = 8

	// stripes is the number of write locks. Two writers on different keys collide with probability 1/stripes;
	// a collision only costs waiting, never correctness.
	stripes = 256

	// versionBlock is how many versions are reserved per counter write. A restart skips at most this many.
	versionBlock = 1 << 16
)

// ceilingKey holds the persisted upper bound (exclusive) of versions handed out so far.
var ceilingKey = []byte{metaNS, 'v', 'e', 'r', 's', 'i', 'o', 'n', '-', 'c', 'e', 'i', 'l'}

// Store is a persistence.Store on Pebble. It is safe for concurrent use by one process; Pebble's lock file
// keeps a second process out of the same directory.
type Store struct {
	db   *pebble.DB
	seed maphash.Seed

	// closeMu is held shared by every operation and exclusively by Close, so Close waits for operations in
	// flight and later calls get an error instead of Pebble's panic on a closed DB.
	closeMu sync.RWMutex
	closed  bool

	locks [stripes]sync.Mutex
	alloc allocator
}

var _ persistence.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. Pebble's own log lines go to logger as given (the caller
// adds its component field): informational ones at debug level, errors at error level. zerolog.Nop() silences
// them.
func Open(dir string, logger zerolog.Logger) (*Store, error) {
	var corrupt atomic.Value // the path of the last corrupt file Pebble reported
	opts := &pebble.Options{
		Logger:             pebbleLogger{log: logger},
		FormatMajorVersion: pebble.FormatNewest,
		EventListener: &pebble.EventListener{
			// Pebble's default for a corrupt file is Logger.Fatalf, which panics: a node whose store had one bad
			// block died with a stack trace at start (or at the first read of the block) instead of saying what
			// is wrong. The read that met the corruption returns it as an error, which Open and every operation
			// pass on (ErrCorrupt at Open).
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				corrupt.Store(info.Path)
				logger.Error().Str("file", info.Path).Msg("the store has a corrupt file (a disk fault or a copy of a running store?): restore the data directory from a backup")
			},
		},
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, openError(dir, err, &corrupt)
	}
	s := &Store{db: db, seed: maphash.MakeSeed()}
	if err := s.alloc.init(db); err != nil {
		_ = db.Close()
		return nil, openError(dir, err, &corrupt)
	}
	return s, nil
}

// ErrCorrupt is what Open returns (wrapped, with Pebble's description) for a store whose files are corrupt.
var ErrCorrupt = errors.New("the store's files are corrupt")

// openError wraps an error of Open. A corruption names the file (when Pebble reported one) and only the first
// line of Pebble's description: the error carries a multi-line detail record after it.
func openError(dir string, err error, corrupt *atomic.Value) error {
	if !pebble.IsCorruptionError(err) {
		return fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	what, _, _ := strings.Cut(err.Error(), "\n")
	if path, ok := corrupt.Load().(string); ok {
		return fmt.Errorf("pebblestore: open %s: %w: %s (%s)", dir, ErrCorrupt, path, what)
	}
	return fmt.Errorf("pebblestore: open %s: %w (%s)", dir, ErrCorrupt, what)
}

func dataKey(key []byte) []byte {
	k := make([]byte, 1+len(key))
	k[0] = dataNS
	copy(k[1:], key)
	return k
}

func encodeValue(v uint64, value []byte) []byte {
	b := make([]byte, versionLen+len(value))
	binary.BigEndian.PutUint64(b, v)
	copy(b[versionLen:], value)
	return b
}

// decodeValue splits a stored value; the returned slice is a copy, since Pebble's buffers die with the closer
// or the iterator step.
func decodeValue(raw []byte) (uint64, []byte, error) {
	if len(raw) < versionLen {
		return 0, nil, fmt.Errorf("corrupt value: %d bytes, shorter than the version header", len(raw))
	}
	return binary.BigEndian.Uint64(raw), bytes.Clone(raw[versionLen:]), nil
}

func render(v uint64) persistence.Version {
	return persistence.Version(strconv.FormatUint(v, 10))
}

func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return errClosed
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

var errClosed = errors.New("store is closed")

func checkKey(key []byte) error {
	if len(key) == 0 {
		return fmt.Errorf("%w: empty store key", persistence.ErrInvalidKey)
	}
	return nil
}

// current reads key's stored version (0 when absent) and value.
func (s *Store) current(key []byte) (uint64, []byte, error) {
	raw, closer, err := s.db.Get(dataKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	defer closer.Close()
	v, value, err := decodeValue(raw)
	if err != nil {
		return 0, nil, err
	}
	if v == 0 {
		return 0, nil, errors.New("corrupt value: version 0")
	}
	return v, value, nil
}

// Get implements persistence.Store.
func (s *Store) Get(ctx context.Context, key []byte) (persistence.Item, error) {
	if err := s.enter(ctx); err != nil {
		return persistence.Item{}, fmt.Errorf("pebblestore: get %q: %w", key, err)
	}
	defer s.leave()
	v, value, err := s.current(key)
	if err != nil {
		return persistence.Item{}, fmt.Errorf("pebblestore: get %q: %w", key, err)
	}
	if v == 0 {
		return persistence.Item{}, fmt.Errorf("pebblestore: get %q: %w", key, persistence.ErrNotFound)
	}
	return persistence.Item{Key: bytes.Clone(key), Value: value, Version: render(v)}, nil
}

func (s *Store) lockFor(key []byte) *sync.Mutex {
	return &s.locks[maphash.Bytes(s.seed, key)%stripes]
}

// matches reports whether the stored version cur (0: absent) is the expected one. An expectation that is not a
// rendering of a stored version (say, an ETag from another backend) never matches.
func matches(cur uint64, expect persistence.Version) bool {
	if expect == persistence.NoVersion {
		return cur == 0
	}
	return cur != 0 && render(cur) == expect
}

// CompareAndSet implements persistence.Store.
func (s *Store) CompareAndSet(ctx context.Context, key []byte, expect persistence.Version, value []byte) (persistence.Version, error) {
	if err := checkKey(key); err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	if err := s.enter(ctx); err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	defer s.leave()
	mu := s.lockFor(key)
	mu.Lock()
	defer mu.Unlock()
	cur, _, err := s.current(key)
	if err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	if !matches(cur, expect) {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: expected version %q, stored %q: %w",
			key, expect, renderOrNone(cur), persistence.ErrVersionMismatch)
	}
	// The lock stripe may have been queued behind other writers: do not write for a caller that gave up.
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	next, err := s.alloc.next(s.db)
	if err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	if err := s.db.Set(dataKey(key), encodeValue(next, value), pebble.Sync); err != nil {
		return "", fmt.Errorf("pebblestore: compare-and-set %q: %w", key, err)
	}
	return render(next), nil
}

func renderOrNone(v uint64) persistence.Version {
	if v == 0 {
		return persistence.NoVersion
	}
	return render(v)
}

// Delete implements persistence.Store.
func (s *Store) Delete(ctx context.Context, key []byte, expect persistence.Version) error {
	if err := checkKey(key); err != nil {
		return fmt.Errorf("pebblestore: delete %q: %w", key, err)
	}
	if err := s.enter(ctx); err != nil {
		return fmt.Errorf("pebblestore: delete %q: %w", key, err)
	}
	defer s.leave()
	mu := s.lockFor(key)
	mu.Lock()
	defer mu.Unlock()
	cur, _, err := s.current(key)
	if err != nil {
		return fmt.Errorf("pebblestore: delete %q: %w", key, err)
	}
	if !matches(cur, expect) {
		return fmt.Errorf("pebblestore: delete %q: expected version %q, stored %q: %w",
			key, expect, renderOrNone(cur), persistence.ErrVersionMismatch)
	}
	if cur == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pebblestore: delete %q: %w", key, err)
	}
	if err := s.db.Delete(dataKey(key), pebble.Sync); err != nil {
		return fmt.Errorf("pebblestore: delete %q: %w", key, err)
	}
	return nil
}

// Scan implements persistence.Store. It reads from an implicit snapshot (one iterator), so a page is
// consistent in itself.
func (s *Store) Scan(ctx context.Context, prefix, start []byte, limit int) ([]persistence.Item, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pebblestore: scan %q: limit %d must be positive", prefix, limit)
	}
	if err := s.enter(ctx); err != nil {
		return nil, fmt.Errorf("pebblestore: scan %q: %w", prefix, err)
	}
	defer s.leave()

	lower := dataKey(prefix)
	if bytes.Compare(start, prefix) > 0 {
		lower = dataKey(start)
	}
	// dataNS is not 0xff, so the end of the namespaced prefix always exists (for an empty or all-0xff prefix it
	// is the first key after the data namespace).
	upper := persistence.PrefixEnd(dataKey(prefix))
	if bytes.Compare(lower, upper) >= 0 {
		return nil, nil
	}
	it, err := s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("pebblestore: scan %q: %w", prefix, err)
	}
	var items []persistence.Item
	for ok := it.First(); ok && len(items) < limit; ok = it.Next() {
		if len(items)%256 == 255 {
			if err := ctx.Err(); err != nil {
				_ = it.Close()
				return nil, fmt.Errorf("pebblestore: scan %q: %w", prefix, err)
			}
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("pebblestore: scan %q: %w", prefix, err)
		}
		v, value, err := decodeValue(raw)
		if err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("pebblestore: scan %q at %q: %w", prefix, it.Key()[1:], err)
		}
		items = append(items, persistence.Item{Key: bytes.Clone(it.Key()[1:]), Value: value, Version: render(v)})
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("pebblestore: scan %q: %w", prefix, err)
	}
	return items, nil
}

// Close flushes the memtable (so the next Open does not replay the WAL) and closes the database. It waits for
// operations in flight; calling it twice is harmless.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	flushErr := s.db.Flush()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("pebblestore: close: %w", err)
	}
	if flushErr != nil {
		return fmt.Errorf("pebblestore: close: flush: %w", flushErr)
	}
	return nil
}

// allocator hands out store-wide versions. The persisted ceiling is always above every version handed out, so
// after a restart (clean or not) new versions start above all old ones. Persisting in blocks keeps the counter
// write off the per-write path; a crash wastes the rest of a block, which is harmless.
type allocator struct {
	mu      sync.Mutex
	nextV   uint64
	ceiling uint64
}

func (a *allocator) init(db *pebble.DB) error {
	raw, closer, err := db.Get(ceilingKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		a.ceiling = 1
	case err != nil:
		return fmt.Errorf("read version ceiling: %w", err)
	default:
		defer closer.Close()
		if len(raw) != 8 {
			return fmt.Errorf("corrupt version ceiling: %d bytes", len(raw))
		}
		a.ceiling = binary.BigEndian.Uint64(raw)
	}
	a.nextV = a.ceiling
	return nil
}

func (a *allocator) next(db *pebble.DB) (uint64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nextV >= a.ceiling {
		ceil := a.ceiling + versionBlock
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], ceil)
		// Synced before any version of the new block is used, so no version can be handed out twice.
		if err := db.Set(ceilingKey, b[:], pebble.Sync); err != nil {
			return 0, fmt.Errorf("persist version ceiling: %w", err)
		}
		a.ceiling = ceil
	}
	v := a.nextV
	a.nextV++
	return v, nil
}

// pebbleLogger routes Pebble's log lines to zerolog. Pebble's informational lines (WAL recovery, compactions)
// are noise for an operator, so they go to debug.
type pebbleLogger struct{ log zerolog.Logger }

func (l pebbleLogger) Infof(format string, args ...any)  { l.log.Debug().Msgf(format, args...) }
func (l pebbleLogger) Errorf(format string, args ...any) { l.log.Error().Msgf(format, args...) }

// Fatalf is called by Pebble on unrecoverable corruption and must not return. Panicking (instead of zerolog's
// os.Exit) lets deferred cleanup and the crash handler see it.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error().Msgf(format, args...)
	panic(fmt.Sprintf("pebble: "+format, args...))
}
