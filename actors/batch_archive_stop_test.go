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

// archiveBuild is a finished batch whose archive build has started, on one assembly slot, with its blobs
// in root (fsblobs) behind the wrapper wrap.
type archiveBuild struct {
	store persistence.Store
	blobs persistence.Blobs
	root  string
	clk   *clock.Manual
	lc    *localCaller
	env   *actors.BatchEnv
	id    string
}

// startArchiveBuild stores a finished batch of orgID and ticks it: the activation takes the free slot and
// starts storing its archive through wrap(blobs).
func startArchiveBuild(t *testing.T, orgID, key string, wrap func(persistence.Blobs) persistence.Blobs) archiveBuild {
	t.Helper()
	b := archiveBuild{store: tempStore(t), root: t.TempDir()}
	blobs, err := fsblobs.Open(b.root)
	if err != nil {
		t.Fatal(err)
	}
	b.blobs = blobs
	b.clk = clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	sys, lc := startSystem(t, b.store, b.store, b.clk)
	t.Cleanup(sys.Shutdown)
	b.lc = lc
	b.env = &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1), Blobs: wrap(blobs)}
	b.id = storeFinishedArchiveBatch(t, b.store, b.clk, orgID, key, 100)
	batchCaller{localCaller: lc, env: b.env}.batch(t, b.id, &actors.BatchTick{BatchID: b.id})
	return b
}

// stopMidBuild stops the batch's activation once signal says the upload got that far, lets the storage answer
// (release), and waits for the build to give its slot back.
func (b archiveBuild) stopMidBuild(t *testing.T, signal <-chan struct{}, release chan struct{}) {
	t.Helper()
	select {
	case <-signal:
	case <-time.After(10 * time.Second):
		t.Fatal("the archive's upload did not start")
	}
	b.lc.gone(t, b.id, actors.KindBatch)
	close(release)
	select {
	case b.env.Assemblies <- struct{}{}:
	case <-time.After(10 * time.Second):
		t.Fatal("the assembly slot was not given back")
	}
}

// zips lists the archive zips stored.
func (b archiveBuild) zips(t *testing.T) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(b.root, func(p string, d fs.DirEntry, err error) error {
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

// TestStoppedActivationLeavesNoArchive: an activation that stops while its archive is being built (the node's
// shutdown stops its activations before the node's lifetime ends; a write refused as another activation's)
// abandons the build. Before, the build went on and stored a zip whose outcome reached no one: the batch's next
// activation built another, and nothing ever deleted the first (seen in chaos17 a3, up to 1 GB each).
func TestStoppedActivationLeavesNoArchive(t *testing.T) {
	puts := &stalledPuts{started: make(chan struct{}, 1), release: make(chan struct{})}
	b := startArchiveBuild(t, "org_"+strings.Repeat("3", 32), "archive-stop-1", func(inner persistence.Blobs) persistence.Blobs {
		puts.Blobs = inner
		return puts
	})
	b.stopMidBuild(t, puts.started, puts.release) // stopped while the storage holds the upload
	if left := b.zips(t); len(left) > 0 {
		t.Fatalf("a stopped activation's archive was stored: %v", left)
	}
}

// TestUnrecordedArchiveIsPurged: an archive whose upload completed just before its activation stopped (or
// before the node crashed) is stored, and no record names it. Before, it stayed for ever; now the build
// lists it for the sweeper's purge pass before uploading, and the pass deletes it once any archive of that
// build would have expired.
func TestUnrecordedArchiveIsPurged(t *testing.T) {
	puts := &heldReturns{stored: make(chan struct{}, 1), release: make(chan struct{})}
	b := startArchiveBuild(t, "org_"+strings.Repeat("4", 32), "archive-unrecorded-1", func(inner persistence.Blobs) persistence.Blobs {
		puts.Blobs = inner
		return puts
	})
	b.stopMidBuild(t, puts.stored, puts.release) // stopped before it reads the upload's outcome
	if got := b.zips(t); len(got) != 1 {
		t.Fatalf("zips stored: %v, want the one unrecorded archive", got)
	}

	sw := actors.Sweeper{Store: b.store, Blobs: b.blobs, Clock: b.clk}
	b.clk.Advance(24 * time.Hour) // the retention a recorded archive would have had: not yet
	if _, err := sw.PurgeResults(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.zips(t); len(got) != 1 {
		t.Fatalf("zips after 24 h: %v, want the archive still there (it could still be a live one)", got)
	}
	b.clk.Advance(2 * time.Hour)
	if _, err := sw.PurgeResults(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := b.zips(t); len(got) != 0 {
		t.Fatalf("an unrecorded archive outlived its purge time: %v", got)
	}
}
