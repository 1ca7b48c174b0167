// Package blobtest is the contract suite for persistence.Blobs. Every backend runs it from its own tests:
//
//	func TestContract(t *testing.T) {
//		blobtest.Run(t, func(t *testing.T) persistence.Blobs { return openEmptyBlobs(t) })
//	}
//
// open must return an empty store and arrange its cleanup with t.Cleanup.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"filigrane/persistence"
)

// Run runs the Blobs contract against stores made by open, one fresh store per subtest.
func Run(t *testing.T, open func(t *testing.T) persistence.Blobs) {
	t.Run("PutGetStat", func(t *testing.T) { testPutGetStat(t, open(t)) })
	t.Run("Missing", func(t *testing.T) { testMissing(t, open(t)) })
	t.Run("Ranges", func(t *testing.T) { testRanges(t, open(t)) })
	t.Run("Empty", func(t *testing.T) { testEmpty(t, open(t)) })
	t.Run("Large", func(t *testing.T) { testLarge(t, open(t)) })
	t.Run("Replace", func(t *testing.T) { testReplace(t, open(t)) })
	t.Run("FailedPut", func(t *testing.T) { testFailedPut(t, open(t)) })
	t.Run("CancelledPut", func(t *testing.T) { testCancelledPut(t, open(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, open(t)) })
	t.Run("InvalidKeys", func(t *testing.T) { testInvalidKeys(t, open(t)) })
	t.Run("ConcurrentPuts", func(t *testing.T) { testConcurrentPuts(t, open(t)) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// content returns n deterministic pseudo-random bytes for seed.
func content(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// trickleReader hands out data in uneven chunks, like a network body, and hides the size (no WriterTo,
// no Len), so backends cannot shortcut streaming.
type trickleReader struct {
	data []byte
	step int
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.step++
	n := min(len(p), len(r.data), 1+(r.step*7919)%65536)
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

func mustPut(t *testing.T, b persistence.Blobs, key string, data []byte) persistence.BlobInfo {
	t.Helper()
	info, err := b.Put(ctxFor(t), key, &trickleReader{data: data})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	if info.Size != int64(len(data)) || info.SHA256 != digest(data) {
		t.Fatalf("Put(%q) = %+v, want size %d sha %s", key, info, len(data), digest(data))
	}
	return info
}

func read(t *testing.T, b persistence.Blobs, key string, offset, length int64) []byte {
	t.Helper()
	rc, err := b.Get(ctxFor(t), key, offset, length)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): %v", key, offset, length, err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Get(%q, %d, %d): read: %v", key, offset, length, err)
	}
	return got
}

func expectContent(t *testing.T, b persistence.Blobs, key string, want []byte) {
	t.Helper()
	if got := read(t, b, key, 0, -1); !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) returned %d bytes (sha %s), want %d (sha %s)", key, len(got), digest(got), len(want), digest(want))
	}
	info, err := b.Stat(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Stat(%q): %v", key, err)
	}
	if info.Size != int64(len(want)) || info.SHA256 != digest(want) {
		t.Fatalf("Stat(%q) = %+v, want size %d sha %s", key, info, len(want), digest(want))
	}
}

func expectMissing(t *testing.T, b persistence.Blobs, key string) {
	t.Helper()
	ctx := ctxFor(t)
	if info, err := b.Stat(ctx, key); !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Stat(%q) = %+v, %v; want ErrNotFound", key, info, err)
	}
	rc, err := b.Get(ctx, key, 0, -1)
	if err == nil {
		// Some backends only learn that the object is missing on the first read.
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	if !errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Get(%q) err = %v; want ErrNotFound", key, err)
	}
}

func testPutGetStat(t *testing.T, b persistence.Blobs) {
	data := []byte("hello, watermark")
	mustPut(t, b, "inputs/job-1/image.png", data)
	expectContent(t, b, "inputs/job-1/image.png", data)
	// Keys that differ only in places a careless path mapping would merge. (A key that is also a "directory" of
	// another key, like "inputs/job-1" here, is not part of the contract: versitygw's posix backend cannot hold
	// both. Callers keep such keys apart.)
	mustPut(t, b, "inputs/job-1.blob", []byte("suffix lookalike"))
	mustPut(t, b, "..x/y..", []byte("dots inside segments"))
	mustPut(t, b, "spaces and ünïcode/% 2F", []byte("odd characters"))
	expectContent(t, b, "inputs/job-1/image.png", data)
	expectContent(t, b, "inputs/job-1.blob", []byte("suffix lookalike"))
	expectContent(t, b, "..x/y..", []byte("dots inside segments"))
	expectContent(t, b, "spaces and ünïcode/% 2F", []byte("odd characters"))
}

func testMissing(t *testing.T, b persistence.Blobs) {
	expectMissing(t, b, "nope")
	expectMissing(t, b, "no/such/dir/file")
	mustPut(t, b, "dir/file", []byte("x"))
	expectMissing(t, b, "dir/fil")
	expectMissing(t, b, "dir/file/below")
	if err := b.Delete(ctxFor(t), "nope"); err != nil {
		t.Fatalf("Delete(missing) = %v, want nil", err)
	}
}

func testRanges(t *testing.T, b persistence.Blobs) {
	data := content(1, 10_000)
	mustPut(t, b, "r", data)
	n := int64(len(data))
	cases := []struct {
		off, length int64
		want        []byte
	}{
		{0, -1, data},
		{0, 10, data[:10]},
		{5, 1, data[5:6]},
		{123, 4000, data[123:4123]},
		{9_990, -1, data[9_990:]},
		{9_990, 100, data[9_990:]}, // runs past the end: cut
		{n - 1, 1, data[n-1:]},
		{n, -1, nil},    // at the end: empty
		{n, 10, nil},    // at the end: empty
		{n + 5, 3, nil}, // past the end: empty
		{17, 0, nil},    // zero length
	}
	for _, c := range cases {
		if got := read(t, b, "r", c.off, c.length); !bytes.Equal(got, c.want) {
			t.Errorf("Get(r, %d, %d) = %d bytes, want %d", c.off, c.length, len(got), len(c.want))
		}
	}
	if rc, err := b.Get(ctxFor(t), "r", -1, 10); err == nil {
		rc.Close()
		t.Errorf("Get with negative offset succeeded")
	}
}

func testEmpty(t *testing.T, b persistence.Blobs) {
	info := mustPut(t, b, "empty", nil)
	if info.SHA256 != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Fatalf("empty blob digest = %s", info.SHA256)
	}
	expectContent(t, b, "empty", nil)
	if got := read(t, b, "empty", 0, 10); len(got) != 0 {
		t.Fatalf("range of empty blob = %d bytes", len(got))
	}
}

func testLarge(t *testing.T, b persistence.Blobs) {
	data := content(2, 6<<20+12345) // over a 5 MiB multipart boundary, not a multiple of anything
	mustPut(t, b, "large/video.mp4", data)
	expectContent(t, b, "large/video.mp4", data)
	off := int64(5<<20 - 100)
	if got := read(t, b, "large/video.mp4", off, 1000); !bytes.Equal(got, data[off:off+1000]) {
		t.Fatalf("range across 5 MiB differs")
	}
}

func testReplace(t *testing.T, b persistence.Blobs) {
	mustPut(t, b, "out/result", []byte("first version, longer than the second"))
	mustPut(t, b, "out/result", []byte("second"))
	expectContent(t, b, "out/result", []byte("second"))
}

// failingReader returns data and then err, the way a client connection that drops mid-upload does.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data[:min(len(r.data), 32<<10)])
	r.data = r.data[n:]
	return n, nil
}

var errDropped = errors.New("client went away")

func testFailedPut(t *testing.T, b persistence.Blobs) {
	ctx := ctxFor(t)
	_, err := b.Put(ctx, "upload/new", &failingReader{data: content(3, 1<<20), err: errDropped})
	if !errors.Is(err, errDropped) {
		t.Fatalf("Put with failing reader = %v, want it to wrap the reader's error", err)
	}
	expectMissing(t, b, "upload/new")

	old := []byte("the previous, complete blob")
	mustPut(t, b, "upload/old", old)
	_, err = b.Put(ctx, "upload/old", &failingReader{data: content(4, 1<<20), err: errDropped})
	if !errors.Is(err, errDropped) {
		t.Fatalf("replacing Put with failing reader = %v, want the reader's error", err)
	}
	expectContent(t, b, "upload/old", old)
}

// cancellingReader cancels its context after handing out some data and keeps serving, like a request whose
// client disconnects while the body is still buffered.
type cancellingReader struct {
	data   []byte
	after  int
	cancel context.CancelFunc
	served int
}

func (r *cancellingReader) Read(p []byte) (int, error) {
	if r.served >= r.after {
		r.cancel()
	}
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.data[:min(len(r.data), 16<<10)])
	r.data = r.data[n:]
	r.served += n
	return n, nil
}

func testCancelledPut(t *testing.T, b persistence.Blobs) {
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	_, err := b.Put(ctx, "cancelled", &cancellingReader{data: content(5, 1<<20), after: 256 << 10, cancel: cancel})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled context = %v, want context.Canceled", err)
	}
	expectMissing(t, b, "cancelled")

	_, err = b.Put(ctx, "cancelled-before", bytes.NewReader([]byte("x")))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with an already cancelled context = %v, want context.Canceled", err)
	}
	expectMissing(t, b, "cancelled-before")
}

func testDelete(t *testing.T, b persistence.Blobs) {
	ctx := ctxFor(t)
	mustPut(t, b, "tmp/a/b", []byte("b"))
	mustPut(t, b, "tmp/a/c", []byte("c"))
	if err := b.Delete(ctx, "tmp/a/b"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	expectMissing(t, b, "tmp/a/b")
	expectContent(t, b, "tmp/a/c", []byte("c"))
	if err := b.Delete(ctx, "tmp/a/b"); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := b.Delete(ctx, "tmp/a/c"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	expectMissing(t, b, "tmp/a/c")
	mustPut(t, b, "tmp/a/b", []byte("again"))
	expectContent(t, b, "tmp/a/b", []byte("again"))
}

func testInvalidKeys(t *testing.T, b persistence.Blobs) {
	ctx := ctxFor(t)
	for _, key := range []string{"", "/etc/passwd", "../escape", "a/../../b", "a//b", "a/", "./a", "a\\b", "a\x00"} {
		if _, err := b.Put(ctx, key, bytes.NewReader([]byte("x"))); !errors.Is(err, persistence.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if rc, err := b.Get(ctx, key, 0, -1); !errors.Is(err, persistence.ErrInvalidKey) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Stat(ctx, key); !errors.Is(err, persistence.ErrInvalidKey) {
			t.Errorf("Stat(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := b.Delete(ctx, key); !errors.Is(err, persistence.ErrInvalidKey) {
			t.Errorf("Delete(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
}

func testConcurrentPuts(t *testing.T, b persistence.Blobs) {
	ctx := ctxFor(t)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := content(uint64(100+i), 200_000+i)
			info, err := b.Put(ctx, fmt.Sprintf("concurrent/%d/blob", i), &trickleReader{data: data})
			if err == nil && info.SHA256 != digest(data) {
				err = fmt.Errorf("digest %s, want %s", info.SHA256, digest(data))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent puts: %v", err)
	}
	for i := range writers {
		expectContent(t, b, fmt.Sprintf("concurrent/%d/blob", i), content(uint64(100+i), 200_000+i))
	}
}
