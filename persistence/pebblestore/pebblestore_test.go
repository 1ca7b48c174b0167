package pebblestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"filigrane/persistence"
	"filigrane/persistence/storetest"
)

func openStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) persistence.Store { return openStore(t, t.TempDir()) })
}

func TestRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	versions := map[string]persistence.Version{}
	for i := range 50 {
		k := fmt.Sprintf("r/%02d", i)
		versions[k] = storetest.MustSet(t, s, k, persistence.NoVersion, "v1:"+k)
	}
	// Overwrite some and delete some, so that the reopened store must replay all three kinds of write.
	for i := range 10 {
		k := fmt.Sprintf("r/%02d", i)
		versions[k] = storetest.MustSet(t, s, k, versions[k], "v2:"+k)
	}
	for i := 10; i < 15; i++ {
		k := fmt.Sprintf("r/%02d", i)
		if err := s.Delete(ctx, []byte(k), versions[k]); err != nil {
			t.Fatal(err)
		}
		delete(versions, k)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Get(ctx, []byte("r/00")); err == nil {
		t.Fatalf("Get after Close succeeded")
	}

	s2 := openStore(t, dir)
	items, err := s2.Scan(ctx, []byte("r/"), nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(versions) {
		t.Fatalf("after reopen %d items, want %d", len(items), len(versions))
	}
	var maxV uint64
	for _, it := range items {
		k := string(it.Key)
		want := "v1:" + k
		if it.Key[2] == '0' {
			want = "v2:" + k
		}
		if string(it.Value) != want || it.Version != versions[k] {
			t.Fatalf("after reopen %q = %q@%q, want %q@%q", k, it.Value, it.Version, want, versions[k])
		}
		maxV = max(maxV, parse(t, it.Version))
	}
	// Versions survive: the old version still works for CAS, and versions handed out after the restart are
	// above every version from before it (so a deleted and re-created key cannot get an old version back).
	v := storetest.MustSet(t, s2, "r/00", versions["r/00"], "v3")
	nv := storetest.MustSet(t, s2, "r/10", persistence.NoVersion, "back")
	for _, got := range []persistence.Version{v, nv} {
		if parse(t, got) <= maxV {
			t.Fatalf("version %s after restart is not above %d", got, maxV)
		}
	}
	if _, err := s2.CompareAndSet(ctx, []byte("r/00"), versions["r/00"], []byte("stale")); !errors.Is(err, persistence.ErrVersionMismatch) {
		t.Fatalf("CAS with the pre-restart version after an update = %v, want ErrVersionMismatch", err)
	}
}

// TestVersionBlockRollover crosses a persisted version block boundary and checks that versions keep rising
// across a restart in the middle of a block.
func TestVersionBlockRollover(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	storetest.MustSet(t, s, "first", persistence.NoVersion, "x") // persists the first block
	s.alloc.mu.Lock()
	s.alloc.nextV = s.alloc.ceiling - 2 // two versions left in the first block
	s.alloc.mu.Unlock()
	var last uint64
	v := persistence.NoVersion
	for range 5 {
		v = storetest.MustSet(t, s, "k", v, "x")
		n := parse(t, v)
		if n <= last {
			t.Fatalf("version %d not above %d", n, last)
		}
		last = n
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir)
	v2 := storetest.MustSet(t, s2, "k", v, "y")
	if parse(t, v2) <= last {
		t.Fatalf("version after restart %s not above %d", v2, last)
	}
}

func parse(t *testing.T, v persistence.Version) uint64 {
	t.Helper()
	var n uint64
	if _, err := fmt.Sscan(string(v), &n); err != nil {
		t.Fatalf("version %q is not decimal: %v", v, err)
	}
	return n
}

// TestMetadataHidden checks that the store's own bookkeeping never appears to callers.
func TestMetadataHidden(t *testing.T) {
	s := openStore(t, t.TempDir())
	storetest.MustSet(t, s, "\x00", persistence.NoVersion, "user")
	items, err := s.Scan(context.Background(), nil, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || !bytes.Equal(items[0].Key, []byte{0}) {
		t.Fatalf("Scan(all) = %v, want only the user key", items)
	}
}

// BenchmarkCompareAndSet measures synced writes: parallel writers on different keys share WAL syncs.
func BenchmarkCompareAndSet(b *testing.B) {
	s, err := Open(b.TempDir(), zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k := []byte(fmt.Sprintf("bench/%d", n.Add(1)))
			if _, err := s.CompareAndSet(ctx, k, persistence.NoVersion, []byte("value")); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A store with a corrupt table file does not open: Open says so (ErrCorrupt, with the file Pebble names) and
// the process goes on. Before, Pebble's corruption report reached Fatalf, and the node panicked at start with
// a stack trace instead of a line saying what is wrong.
func TestOpenCorruptStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		storetest.MustSet(t, s, fmt.Sprintf("r/%02d", i), persistence.NoVersion, "value")
	}
	if err := s.db.Flush(); err != nil { // into a table file, where blocks carry checksums
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(tables) == 0 {
		t.Fatalf("no table file after a flush: %v %v", tables, err)
	}
	for _, tbl := range tables {
		f, err := os.OpenFile(tbl, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The first data block starts the file: a few bytes inside it break its checksum.
		if _, err := f.WriteAt([]byte("corrupt!"), 16); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var logged bytes.Buffer
	s, err = Open(dir, zerolog.New(&logged))
	if err == nil {
		s.Close()
		t.Fatal("Open of a store with a corrupt table file succeeded")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), ".sst") {
		t.Fatalf("Open error = %v, want ErrCorrupt naming the file", err)
	}
	if !strings.Contains(logged.String(), "restore the data directory from a backup") {
		t.Errorf("log = %q, want the corrupt file reported", logged.String())
	}
}
