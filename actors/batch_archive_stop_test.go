package actors_test

import (
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/fsblobs"
)

// stalledPuts holds every Put until release is closed (object storage frozen), telling started when the first
// arrives; a Put whose context ended meanwhile stores nothing, as a cut upload does.
type stalledPuts struct {
	persistence.Blobs
	started chan struct{}
	release chan struct{}
}

func (s *stalledPuts) Put(ctx context.Context, key string, r io.Reader) (persistence.BlobInfo, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-s.release
	if err := ctx.Err(); err != nil {
		return persistence.BlobInfo{}, err
	}
	return s.Blobs.Put(ctx, key, r)
}

// TestStoppedActivationLeavesNoArchive: an activation that stops while its archive is being built (the node's
// shutdown stops its activations before the node's lifetime ends; a write refused as another activation's)
// abandons the build. Before, the build went on and stored a zip whose outcome reached no one: the batch's next
// activation built another, and nothing ever deleted the first (seen in chaos17 a3, up to 1 GB each).
func TestStoppedActivationLeavesNoArchive(t *testing.T) {
	store := tempStore(t)
	root := t.TempDir()
	blobs, err := fsblobs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	sys, lc := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	puts := &stalledPuts{Blobs: blobs, started: make(chan struct{}, 1), release: make(chan struct{})}
	env := &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1), Blobs: puts}
	c := batchCaller{localCaller: lc, env: env}

	orgID := "org_" + strings.Repeat("3", 32)
	id := storeFinishedArchiveBatch(t, store, clk, orgID, "archive-stop-1", 100)

	// The tick activates the batch, which takes the free slot and starts storing its archive.
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	select {
	case <-puts.started:
	case <-time.After(10 * time.Second):
		t.Fatal("the archive's upload did not start")
	}
	lc.gone(t, id, actors.KindBatch) // the activation stops mid-build
	close(puts.release)              // the storage answers again

	// The build ends (its slot is given back) without leaving a zip behind.
	select {
	case env.Assemblies <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the assembly slot was not given back")
	}
	var left []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "archives") {
			left = append(left, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("a stopped activation's archive was stored: %v", left)
	}
}

// heldReturns stores each Put at once, then holds its return until release is closed, telling stored when
// the first is stored: the upload is complete, and its outcome has yet to reach the actor.
type heldReturns struct {
	persistence.Blobs
	stored  chan struct{}
	release chan struct{}
}

func (h *heldReturns) Put(ctx context.Context, key string, r io.Reader) (persistence.BlobInfo, error) {
	info, err := h.Blobs.Put(ctx, key, r)
	select {
	case h.stored <- struct{}{}:
	default:
	}
	<-h.release
	return info, err
}

// TestUnrecordedArchiveIsPurged: an archive whose upload completed just before its activation stopped (or
// before the node crashed) is stored, and no record names it. Before, it stayed for ever; now the build
// lists it for the sweeper's purge pass before uploading, and the pass deletes it once any archive of that
// build would have expired.
func TestUnrecordedArchiveIsPurged(t *testing.T) {
	store := tempStore(t)
	root := t.TempDir()
	blobs, err := fsblobs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	sys, lc := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	puts := &heldReturns{Blobs: blobs, stored: make(chan struct{}, 1), release: make(chan struct{})}
	env := &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1), Blobs: puts}
	c := batchCaller{localCaller: lc, env: env}

	orgID := "org_" + strings.Repeat("4", 32)
	id := storeFinishedArchiveBatch(t, store, clk, orgID, "archive-unrecorded-1", 100)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	select {
	case <-puts.stored:
	case <-time.After(10 * time.Second):
		t.Fatal("the archive was not stored")
	}
	lc.gone(t, id, actors.KindBatch) // the activation stops before it reads the outcome
	close(puts.release)
	select {
	case env.Assemblies <- struct{}{}: // the build is over
	case <-time.After(10 * time.Second):
		t.Fatal("the assembly slot was not given back")
	}
	zips := func() []string {
		var found []string
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(p, "archives") && strings.Contains(p, ".zip") {
				found = append(found, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	if got := zips(); len(got) != 1 {
		t.Fatalf("zips stored: %v, want the one unrecorded archive", got)
	}

	sw := actors.Sweeper{Store: store, Blobs: blobs, Clock: clk}
	clk.Advance(24 * time.Hour) // the retention a recorded archive would have had: not yet
	if _, err := sw.PurgeResults(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := zips(); len(got) != 1 {
		t.Fatalf("zips after 24 h: %v, want the archive still there (it could still be a live one)", got)
	}
	clk.Advance(2 * time.Hour)
	if _, err := sw.PurgeResults(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := zips(); len(got) != 0 {
		t.Fatalf("an unrecorded archive outlived its purge time: %v", got)
	}
}
