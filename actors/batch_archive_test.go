package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/internal/clock"
	"filigrane/persistence"
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
