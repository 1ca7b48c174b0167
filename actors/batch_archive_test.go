package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/internal/loglines"
	"github.com/rs/zerolog"

	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/diskspace"
	"filigrane/persistence/fsblobs"
)

// TestArchiveWaitsQueuedForAnAssemblySlot: a batch whose files are done reads archive_status queued while the
// node's assembly slots are all taken (spec 3.5: null, then queued, assembling, ready), and builds its archive
// once one is free, giving the slot back after. The results here are too large for a zip, so the build ends
// at once as too_large without reading them.
func TestArchiveWaitsQueuedForAnAssemblySlot(t *testing.T) {
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	sys, lc := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	env := &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1)}
	env.Assemblies <- struct{}{} // another batch's assembly holds the node's only slot
	c := batchCaller{localCaller: lc, env: env}

	// A started archive batch whose two files succeeded, as its last item's job leaves it.
	orgID := "org_" + strings.Repeat("2", 32)
	id := storeFinishedArchiveBatch(t, store, clk, orgID, "archive-queue-1", 600_000_000, 600_000_000)

	// The tick activates the batch, which asks for a slot; none is free.
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	got := c.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: orgID}).Record
	if got.Status != batchstate.StatusAssembling || got.ArchiveStatus != batchstate.ArchiveQueued {
		t.Fatalf("waiting for a slot: %s, archive %q; want assembling, queued", got.Status, got.ArchiveStatus)
	}

	<-env.Assemblies // the other assembly ends
	deadline := time.Now().Add(10 * time.Second)
	for got.Status == batchstate.StatusAssembling {
		if time.Now().After(deadline) {
			t.Fatalf("the archive was not built after the slot was freed: %s, archive %q", got.Status, got.ArchiveStatus)
		}
		got = c.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: orgID}).Record
	}
	if got.Status != batchstate.StatusCompleted || got.ArchiveStatus != batchstate.ArchiveTooLarge {
		t.Fatalf("after the build: %s, archive %q; want completed, too_large", got.Status, got.ArchiveStatus)
	}
	// The slot is given back: another assembly can take it at once.
	select {
	case env.Assemblies <- struct{}{}:
	default:
		t.Fatal("the assembly slot was not given back")
	}
}

// storeFinishedArchiveBatch stores, under the key of (orgID, idem), a started archive batch of one succeeded
// PNG item per size, as its last item's job leaves it (assembling, archive queued), and returns its id.
func storeFinishedArchiveBatch(t *testing.T, store persistence.Store, clk clock.Clock, orgID, idem string, sizes ...int64) string {
	t.Helper()
	id := batchstate.BatchIDFor(orgID, idem)
	items := make([]batchstate.ItemSpec, len(sizes))
	for i := range items {
		items[i] = batchstate.ItemSpec{Filename: string(rune('a'+i)) + ".png", Size: 100, Media: jobstate.MediaImage,
			WatermarkID: strings.Repeat("c", 64)}
	}
	rec, err := batchstate.New(batchstate.Spec{BatchID: id, OrgID: orgID, Source: batchstate.SourceUploads,
		Accelerator: jobstate.AcceleratorCPU, IdempotencyKey: idem, Archive: true, Items: items}, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Start(clk.Now()); err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		if err := rec.Accept(i, 1, clk.Now()); err != nil {
			t.Fatal(err)
		}
		res := batchstate.Result{AssetID: "ast_" + strings.Repeat(string(rune('a'+i)), 64), BlobKey: "results/" + items[i].Filename,
			Size: size, ContentType: "image/png", Ext: "png", ExpiresAt: clk.Now().Add(24 * time.Hour)}
		if err := rec.Succeed(i, 1, res, clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if rec.Status != batchstate.StatusAssembling || rec.ArchiveStatus != batchstate.ArchiveQueued {
		t.Fatalf("files done: %s, archive %q; want assembling, queued", rec.Status, rec.ArchiveStatus)
	}
	b, err := persistence.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompareAndSet(context.Background(), []byte("batch/"+id), persistence.NoVersion, b); err != nil {
		t.Fatal(err)
	}
	return id
}

// awaitArchive asks for the batch until it is no longer assembling (10 s at most), and returns it.
func awaitArchive(t *testing.T, c batchCaller, id, orgID string) *batchstate.Record {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := c.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: orgID}).Record
		if got.Status != batchstate.StatusAssembling {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("still assembling, archive %q", got.ArchiveStatus)
		}
	}
}

// A batch's archive built while the node is low on disk space (the blob store's reserve refuses the zip) waits
// for space instead of ending failed: the batch stays assembling, builds again after 2 s (doubling up to 30 s,
// on the injected clock), and ends completed with its archive ready once space is freed. One that is still
// refused 30 minutes after its first refusal ends failed, as before. Before, the first refusal ended the
// archive failed for good.
func TestArchiveWaitsForDiskSpace(t *testing.T) {
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	sys, lc := startSystem(t, store, store, clk)
	t.Cleanup(sys.Shutdown)
	lines := loglines.New(64)
	lc.deps.Logger = zerolog.New(lines)
	guard := diskspace.New(t.TempDir(), 1<<62) // more than any disk has: every file is refused
	blobs, err := fsblobs.OpenGuarded(t.TempDir(), guard)
	if err != nil {
		t.Fatal(err)
	}
	c := batchCaller{localCaller: lc, env: &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1), Blobs: blobs}}
	orgID := "org_" + strings.Repeat("3", 32)
	const refused = "archive refused for want of disk space"

	id := storeFinishedArchiveBatch(t, store, clk, orgID, "archive-disk-1", 100)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	lines.Wait(t, refused, 10*time.Second)
	if got := c.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: orgID}).Record; got.Status != batchstate.StatusAssembling {
		t.Fatalf("archive refused for want of disk space: %s, archive %q; want assembling", got.Status, got.ArchiveStatus)
	}
	guard.SetReserve(1) // space freed
	clk.Advance(2 * time.Second)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	if got := awaitArchive(t, c, id, orgID); got.Status != batchstate.StatusCompleted || got.ArchiveStatus != batchstate.ArchiveReady {
		t.Fatalf("once space is freed: %s, archive %q; want completed, ready", got.Status, got.ArchiveStatus)
	} else if _, err := blobs.Stat(context.Background(), got.ArchiveBlobKey); err != nil {
		t.Fatalf("the ready archive's zip: %v", err)
	}

	guard.SetReserve(1 << 62)
	id = storeFinishedArchiveBatch(t, store, clk, orgID, "archive-disk-2", 100)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	lines.Wait(t, refused, 10*time.Second)
	clk.Advance(30 * time.Minute)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	lines.Wait(t, "the node stayed low on disk space", 10*time.Second)
	if got := awaitArchive(t, c, id, orgID); got.Status != batchstate.StatusCompleted || got.ArchiveStatus != batchstate.ArchiveFailed {
		t.Fatalf("still low after 30 minutes: %s, archive %q; want completed, failed", got.Status, got.ArchiveStatus)
	}
}

// An archive waiting for disk space ends failed 30 minutes after its first build began even when the node
// restarted meanwhile: the wait counts from the record's ArchiveStartedAt, not from the new activation's first
// refusal. Before, a restart started the 30 minutes over (here the archive still read assembling).
func TestArchiveDiskWaitSurvivesRestart(t *testing.T) {
	store := tempStore(t)
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	guard := diskspace.New(t.TempDir(), 1<<62) // more than any disk has: every file is refused
	blobs, err := fsblobs.OpenGuarded(t.TempDir(), guard)
	if err != nil {
		t.Fatal(err)
	}
	orgID := "org_" + strings.Repeat("4", 32)
	id := storeFinishedArchiveBatch(t, store, clk, orgID, "archive-disk-restart", 100)
	start := func() (batchCaller, loglines.Lines) {
		_, lc := startSystem(t, store, store, clk)
		lines := loglines.New(64)
		lc.deps.Logger = zerolog.New(lines)
		return batchCaller{localCaller: lc, env: &actors.BatchEnv{Pulse: time.Hour, Assemblies: make(chan struct{}, 1), Blobs: blobs}}, lines
	}
	c, lines := start()
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	lines.Wait(t, "archive refused for want of disk space", 10*time.Second)
	c.system.Shutdown() // the node restarts, still low

	clk.Advance(30 * time.Minute)
	c, lines = start()
	t.Cleanup(c.system.Shutdown)
	c.batch(t, id, &actors.BatchTick{BatchID: id})
	lines.Wait(t, "archive: the node stayed low on disk space", 10*time.Second)
	if got := awaitArchive(t, c, id, orgID); got.Status != batchstate.StatusCompleted || got.ArchiveStatus != batchstate.ArchiveFailed {
		t.Fatalf("30 minutes after the first build, across a restart: %s, archive %q; want completed, failed", got.Status, got.ArchiveStatus)
	}
}
