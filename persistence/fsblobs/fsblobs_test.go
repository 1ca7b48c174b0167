package fsblobs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/persistence"
	"filigrane/persistence/blobtest"
)

func openBlobs(t *testing.T, root string) *Blobs {
	t.Helper()
	b, err := Open(root)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return b
}

func TestContract(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) persistence.Blobs { return openBlobs(t, t.TempDir()) })
}

// TestKeyAndDirectoryCoexist covers what the filesystem layout adds over the contract: a key may also be the
// "directory" of other keys.
func TestKeyAndDirectoryCoexist(t *testing.T) {
	ctx := context.Background()
	b := openBlobs(t, t.TempDir())
	for _, k := range []string{"a/b", "a", "a.d", "a.d/x", "a.blob"} {
		if _, err := b.Put(ctx, k, strings.NewReader("v:"+k)); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	for _, k := range []string{"a/b", "a", "a.d", "a.d/x", "a.blob"} {
		rc, err := b.Get(ctx, k, 0, -1)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "v:"+k {
			t.Fatalf("Get(%q) = %q", k, got)
		}
	}
}

// TestNothingLeftBehind checks that failed puts leave no staging files and deletes leave no empty directories.
func TestNothingLeftBehind(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b := openBlobs(t, root)
	_, err := b.Put(ctx, "x/y/z", io.MultiReader(strings.NewReader("partial"), errReader{}))
	if err == nil {
		t.Fatal("Put with failing reader succeeded")
	}
	if _, err := b.Put(ctx, "x/y/z", strings.NewReader("ok")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "x/y/z"); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"tmp", "data"} {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 0 {
			t.Fatalf("%s/ holds %d entries after failed put and delete, want none", dir, len(entries))
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("boom") }

// TestOpenSweepsStaleStaging: a crash mid-Put leaves a staging file; the next Open removes it once it is old.
func TestOpenSweepsStaleStaging(t *testing.T) {
	root := t.TempDir()
	openBlobs(t, root)
	stale := filepath.Join(root, "tmp", "put-stale")
	fresh := filepath.Join(root, "tmp", "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * staleTemp)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	openBlobs(t, root)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale staging file survived Open: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("fresh staging file removed by Open: %v", err)
	}
}

// TestCorruptFileDetected: a truncated blob file is reported, not served short.
func TestCorruptFileDetected(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	b := openBlobs(t, root)
	if _, err := b.Put(ctx, "c", bytes.NewReader(make([]byte, 1000))); err != nil {
		t.Fatal(err)
	}
	path, _ := b.path("c")
	if err := os.Truncate(path, 500); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "c"); err == nil || errors.Is(err, persistence.ErrNotFound) {
		t.Fatalf("Stat of truncated blob = %v, want a corruption error", err)
	}
}

// TestReaderSurvivesReplace: an open reader keeps the blob it opened.
func TestReaderSurvivesReplace(t *testing.T) {
	ctx := context.Background()
	b := openBlobs(t, t.TempDir())
	if _, err := b.Put(ctx, "k", strings.NewReader("old contents")); err != nil {
		t.Fatal(err)
	}
	rc, err := b.Get(ctx, "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if _, err := b.Put(ctx, "k", strings.NewReader("new")); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || string(got) != "old contents" {
		t.Fatalf("reader after replace = %q, %v", got, err)
	}
}
