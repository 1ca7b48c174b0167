// Package fsblobs implements persistence.Blobs on a local filesystem: the blob store of the single-node mode.
//
// Layout under the root directory:
//
//	data/   one file per blob; key segment "s" is directory "s.d" for inner segments and file "s.blob" for the
//	        last one, so keys "a" and "a/b" can coexist (a plain mapping would need "a" as file and directory)
//	tmp/    staging files of Puts in progress; removed by Open when older than an hour (left by a crash)
//
// Each blob file starts with a fixed header holding the blob's size and SHA-256, followed by the bytes. Keeping
// the digest inside the file (rather than in a sidecar) means one rename publishes data and digest together:
// there is no moment, crash included, where a Stat can see one blob's digest next to another blob's bytes.
//
// A Put streams into a staging file while hashing, writes the header, fsyncs, renames the file into place and
// fsyncs the directory. A Put that fails (reader error, cancelled context, full disk) removes its staging file
// and leaves any previous blob under the key untouched.
package fsblobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"filigrane/persistence"
	"filigrane/persistence/diskspace"
)

const (
	headerLen = 64
	// magic identifies a blob file and its header layout; bump the last byte when the layout changes.
	magic = "FGBLOB\x00\x01"

	fileSuffix = ".blob"
	dirSuffix  = ".d"

	staleTemp = time.Hour
)

// Header layout: magic (8) | size uint64 big-endian (8) | sha256 (32) | reserved zeros (16).

// Blobs is a persistence.Blobs on a directory tree. It is safe for concurrent use, also by several Blobs values
// on the same root.
type Blobs struct {
	data  string
	tmp   string
	guard *diskspace.Guard // nil: no reserve kept
}

var _ persistence.Blobs = (*Blobs)(nil)

// Open prepares root (creating it if needed) and removes staging files that a crashed process left behind.
func Open(root string) (*Blobs, error) { return OpenGuarded(root, nil) }

// OpenGuarded is Open with guard's reserve kept free: a Put is refused (diskspace.ErrLow) before it starts, and
// stopped as it streams, once less than the reserve is free; a Put the filesystem refuses for want of space
// fails with diskspace.ErrLow too.
func OpenGuarded(root string, guard *diskspace.Guard) (*Blobs, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("fsblobs: open %s: %w", root, err)
	}
	b := &Blobs{data: filepath.Join(abs, "data"), tmp: filepath.Join(abs, "tmp"), guard: guard}
	for _, dir := range []string{b.data, b.tmp} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("fsblobs: open %s: %w", root, err)
		}
	}
	if err := b.sweepTemp(); err != nil {
		return nil, fmt.Errorf("fsblobs: open %s: %w", root, err)
	}
	return b, nil
}

// sweepTemp removes old staging files. Young ones may belong to a Put in progress in another Blobs on the
// same root, so they are left alone.
func (b *Blobs) sweepTemp() error {
	entries, err := os.ReadDir(b.tmp)
	if err != nil {
		return err
	}
	cutoff := time.Now().Add(-staleTemp)
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || info.ModTime().After(cutoff) {
			continue
		}
		_ = os.Remove(filepath.Join(b.tmp, e.Name()))
	}
	return nil
}

// path maps a validated key to its file and the chain of directories above it.
func (b *Blobs) path(key string) (string, error) {
	if err := persistence.ValidateBlobKey(key); err != nil {
		return "", err
	}
	segs := strings.Split(key, "/")
	parts := make([]string, 0, len(segs)+1)
	parts = append(parts, b.data)
	for _, s := range segs[:len(segs)-1] {
		parts = append(parts, s+dirSuffix)
	}
	parts = append(parts, segs[len(segs)-1]+fileSuffix)
	return filepath.Join(parts...), nil
}

// ctxReader stops a copy when the context ends, so a cancelled Put does not run the reader dry first.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// guardedWriter asks the guard again after every guardEvery bytes, so that one large upload stops at the
// reserve rather than filling the filesystem (a guard read at the start alone lets a 192 MB upload through
// with 1 MB free above the reserve).
type guardedWriter struct {
	w       io.Writer
	guard   *diskspace.Guard
	pending int
}

const guardEvery = 1 << 20

func (g *guardedWriter) Write(p []byte) (int, error) {
	if g.pending += len(p); g.pending >= guardEvery {
		g.pending = 0
		if err := g.guard.Files(); err != nil {
			return 0, err
		}
	}
	return g.w.Write(p)
}

// Put implements persistence.Blobs.
func (b *Blobs) Put(ctx context.Context, key string, r io.Reader) (info persistence.BlobInfo, err error) {
	path, err := b.path(key)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, err)
	}
	if err := b.guard.Files(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, err)
	}
	tmp, n, sum, err := b.stage(ctx, r)
	if err != nil {
		// Any write of the staging file may meet a full filesystem: said once here, as ErrLow.
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, diskspace.MarkFull(err))
	}
	published := false
	defer func() {
		if !published {
			_ = os.Remove(tmp)
		}
	}()
	// Last chance to honour cancellation: after the rename the blob is visible.
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, err)
	}
	if err := b.publish(tmp, path); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: put %q: %w", key, err)
	}
	published = true
	return persistence.BlobInfo{Size: n, SHA256: hex.EncodeToString(sum[:])}, nil
}

// stage writes r behind the blob header into a new staging file under tmp/, hashing it, fills in the header,
// fsyncs and closes the file, and returns its name, size and digest. A stage that fails removes its file.
func (b *Blobs) stage(ctx context.Context, r io.Reader) (name string, n int64, sum [sha256.Size]byte, err error) {
	f, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return "", 0, sum, err
	}
	closed := false
	defer func() {
		if err != nil {
			if !closed {
				_ = f.Close()
			}
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(make([]byte, headerLen)); err != nil {
		return "", 0, sum, err
	}
	h := sha256.New()
	if n, err = io.Copy(io.MultiWriter(&guardedWriter{w: f, guard: b.guard}, h), ctxReader{ctx, r}); err != nil {
		return "", 0, sum, fmt.Errorf("after %d bytes: %w", n, err)
	}
	h.Sum(sum[:0])
	if _, err = f.WriteAt(encodeHeader(n, sum), 0); err != nil {
		return "", 0, sum, err
	}
	if err = f.Sync(); err != nil {
		return "", 0, sum, fmt.Errorf("sync: %w", err)
	}
	closed = true
	if err = f.Close(); err != nil {
		return "", 0, sum, err
	}
	return f.Name(), n, sum, nil
}

// publish renames the staging file to path, creating parent directories. A concurrent Delete may remove an
// emptied parent between mkdirs and Rename, so that race is retried a few times.
func (b *Blobs) publish(tmp, path string) error {
	dir := filepath.Dir(path)
	var err error
	for range 5 {
		if err = b.mkdirs(dir); err != nil {
			return err
		}
		err = os.Rename(tmp, path)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	// The rename is durable only once the directory entry is.
	return syncDir(dir)
}

// mkdirs creates dir and its missing parents below the data root, and syncs the parent of each directory it
// creates: otherwise a crash could lose a new directory, and with it a blob whose Put had returned.
func (b *Blobs) mkdirs(dir string) error {
	var missing []string
	for d := dir; d != b.data; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	for _, d := range missing {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

func encodeHeader(size int64, sum [sha256.Size]byte) []byte {
	h := make([]byte, headerLen)
	copy(h, magic)
	binary.BigEndian.PutUint64(h[8:], uint64(size))
	copy(h[16:], sum[:])
	return h
}

// open opens key's file and reads its header, checking it against the file's length.
func (b *Blobs) open(key string) (*os.File, persistence.BlobInfo, error) {
	path, err := b.path(key)
	if err != nil {
		return nil, persistence.BlobInfo{}, err
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, persistence.BlobInfo{}, persistence.ErrNotFound
	}
	if err != nil {
		return nil, persistence.BlobInfo{}, err
	}
	info, err := readHeader(f)
	if err != nil {
		_ = f.Close()
		return nil, persistence.BlobInfo{}, err
	}
	return f, info, nil
}

func readHeader(f *os.File) (persistence.BlobInfo, error) {
	h := make([]byte, headerLen)
	if _, err := io.ReadFull(f, h); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("corrupt blob file %s: header: %w", f.Name(), err)
	}
	if !bytes.Equal(h[:8], []byte(magic)) {
		return persistence.BlobInfo{}, fmt.Errorf("corrupt blob file %s: bad magic %x", f.Name(), h[:8])
	}
	size := int64(binary.BigEndian.Uint64(h[8:]))
	st, err := f.Stat()
	if err != nil {
		return persistence.BlobInfo{}, err
	}
	if st.Size() != headerLen+size {
		return persistence.BlobInfo{}, fmt.Errorf("corrupt blob file %s: header says %d bytes, file holds %d", f.Name(), size, st.Size()-headerLen)
	}
	return persistence.BlobInfo{Size: size, SHA256: hex.EncodeToString(h[16:48])}, nil
}

// Get implements persistence.Blobs. The returned reader keeps reading the blob it opened even if the key is
// replaced or deleted meanwhile.
func (b *Blobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("fsblobs: get %q: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fsblobs: get %q: %w", key, err)
	}
	f, info, err := b.open(key)
	if err != nil {
		return nil, fmt.Errorf("fsblobs: get %q: %w", key, err)
	}
	offset = min(offset, info.Size)
	n := info.Size - offset
	if length >= 0 {
		n = min(n, length)
	}
	return &rangeReader{SectionReader: io.NewSectionReader(f, headerLen+offset, n), f: f}, nil
}

type rangeReader struct {
	*io.SectionReader
	f *os.File
}

func (r *rangeReader) Close() error { return r.f.Close() }

// Stat implements persistence.Blobs. It reads the header only; nothing is re-hashed.
func (b *Blobs) Stat(ctx context.Context, key string) (persistence.BlobInfo, error) {
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: stat %q: %w", key, err)
	}
	f, info, err := b.open(key)
	if err != nil {
		return persistence.BlobInfo{}, fmt.Errorf("fsblobs: stat %q: %w", key, err)
	}
	_ = f.Close()
	return info, nil
}

// Delete implements persistence.Blobs. It also removes directories the deletion left empty, so that expiring
// blobs does not leave a tree of empty directories behind.
func (b *Blobs) Delete(ctx context.Context, key string) error {
	path, err := b.path(key)
	if err != nil {
		return fmt.Errorf("fsblobs: delete %q: %w", key, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fsblobs: delete %q: %w", key, err)
	}
	err = os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fsblobs: delete %q: %w", key, err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("fsblobs: delete %q: %w", key, err)
	}
	// Removing a non-empty directory fails, which is what stops the walk up.
	for dir := filepath.Dir(path); dir != b.data; dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}
