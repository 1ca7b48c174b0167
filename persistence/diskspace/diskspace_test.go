package diskspace_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"filigrane/persistence"
	"filigrane/persistence/diskspace"
	"filigrane/persistence/pebblestore"
)

// The guard reads the real filesystem of the directory: a reserve above what any disk has refuses file and
// record writes (ErrLow, naming the flag), one of a byte refuses nothing, and no guard refuses nothing. Runs
// without root; TestLowDiskRefusesThenRecovers (internal/node) fills a real tmpfs where root is available.
func TestGuardReadsTheFilesystem(t *testing.T) {
	dir := t.TempDir()
	var nilGuard *diskspace.Guard
	if diskspace.New(dir, 0) != nil || nilGuard.Files() != nil || nilGuard.Records() != nil {
		t.Fatal("a reserve of 0 guards something")
	}
	if g := diskspace.New(dir, 1); g.Files() != nil || g.Records() != nil {
		t.Fatalf("a reserve of one byte refused a write: %v %v", g.Files(), g.Records())
	}
	huge := diskspace.New(dir, 1<<62)
	for name, err := range map[string]error{"files": huge.Files(), "records": huge.Records()} {
		if !errors.Is(err, diskspace.ErrLow) {
			t.Fatalf("%s under an impossible reserve: %v, want ErrLow", name, err)
		}
	}

	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	v, err := store.CompareAndSet(ctx, []byte("k"), persistence.NoVersion, []byte("v"))
	if err != nil {
		t.Fatal(err)
	}
	guarded := diskspace.Store(store, huge)
	if _, err := guarded.CompareAndSet(ctx, []byte("k2"), persistence.NoVersion, []byte("v")); !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("a record write under the reserve: %v, want ErrLow", err)
	}
	if _, err := guarded.Get(ctx, []byte("k")); err != nil {
		t.Fatalf("a read under the reserve: %v", err)
	}
	if err := guarded.Delete(ctx, []byte("k"), v); err != nil {
		t.Fatalf("a delete under the reserve (how space comes back): %v", err)
	}
}

func TestMarkFull(t *testing.T) {
	full := fmt.Errorf("write x: %w", &fs.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC})
	if err := diskspace.MarkFull(full); !errors.Is(err, diskspace.ErrLow) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("MarkFull(ENOSPC) = %v", err)
	}
	other := errors.New("connection refused")
	if diskspace.MarkFull(other) != other || diskspace.MarkFull(nil) != nil {
		t.Fatal("MarkFull changed an error that is not ENOSPC")
	}
}

// The records of work already done (a context marked Outcome) are written down to an eighth of the reserve,
// where other records are refused below a quarter: with 5 times the free space as the reserve, a plain record
// write is refused and an outcome is taken; with 16 times, both are refused. Files are refused in both.
func TestOutcomesBelowTheRecordsQuarter(t *testing.T) {
	dir := t.TempDir()
	g := diskspace.New(dir, 1)
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	guarded := diskspace.Store(store, g)
	ctx := context.Background()
	free, err := g.Free()
	if err != nil {
		t.Fatal(err)
	}
	g.SetReserve(5 * free) // a quarter is 1.25 times the free space, an eighth 0.625 times
	if _, err := guarded.CompareAndSet(ctx, []byte("plain"), persistence.NoVersion, []byte("v")); !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("a plain record write below a quarter of the reserve: %v, want ErrLow", err)
	}
	if _, err := guarded.CompareAndSet(diskspace.Outcome(ctx), []byte("outcome"), persistence.NoVersion, []byte("v")); err != nil {
		t.Fatalf("an outcome above an eighth of the reserve: %v", err)
	}
	if _, err := store.Get(ctx, []byte("outcome")); err != nil {
		t.Fatalf("the outcome taken was not written: %v", err)
	}
	if !errors.Is(g.Files(), diskspace.ErrLow) || !errors.Is(g.Records(), diskspace.ErrLow) || g.Outcomes() != nil {
		t.Fatalf("files %v, records %v, outcomes %v", g.Files(), g.Records(), g.Outcomes())
	}
	g.SetReserve(16 * free)
	if _, err := guarded.CompareAndSet(diskspace.Outcome(ctx), []byte("outcome2"), persistence.NoVersion, []byte("v")); !errors.Is(err, diskspace.ErrLow) {
		t.Fatalf("an outcome below an eighth of the reserve: %v, want ErrLow", err)
	}
}

// Near: less than twice the reserve free, whether or not writes are refused yet; never for no guard.
func TestNearTheReserve(t *testing.T) {
	var nilGuard *diskspace.Guard
	if nilGuard.Near() {
		t.Fatal("no guard is near its reserve")
	}
	g := diskspace.New(t.TempDir(), 1)
	free, err := g.Free()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		reserve   uint64
		near, low bool
	}{{1, false, false}, {free / 3, false, false}, {free / 3 * 2, true, false}, {free * 2, true, true}} {
		g.SetReserve(tc.reserve)
		if g.Near() != tc.near || g.Low() != tc.low {
			t.Errorf("reserve %d of %d free: near %v, low %v; want %v, %v", tc.reserve, free, g.Near(), g.Low(),
				tc.near, tc.low)
		}
	}
}
