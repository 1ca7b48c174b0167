package actors_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"filigrane/actors"
	"filigrane/actors/batchstate"
	"filigrane/actors/jobstate"
	"filigrane/internal/admin"
	"filigrane/internal/clock"
	"filigrane/persistence"
	"filigrane/persistence/pebblestore"
)

// TestBatchCancelAdoptsAnItemWhoseJobWasSubmitted: a batch activation submitted its first item's job and
// stopped before it saved the acceptance (its node was shut down: bench chaos with SIGTERM), so the record
// shows the item pending while the job exists, credits held. A cancel then reaches the batch on another node.
// The item must be taken as accepted and its job cancelled with the batch: before, the cancel rejected the
// pending item as cancelled (charged nothing) and left its job to run, so the organization was charged for an
// item its batch reports cancelled (the chaos run's ledger charged a batch item the client never saw succeed).
func TestBatchCancelAdoptsAnItemWhoseJobWasSubmitted(t *testing.T) {
	ctx := context.Background()
	store, err := pebblestore.Open(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := clock.NewManual(time.Date(2026, 6, 1, 10, 0, 0, 0, time.UTC))
	adm := admin.Admin{Store: store, Clock: clk, Catalog: actors.DefaultCatalog()}
	org, err := adm.CreateOrg(ctx, "Acme", "scale", 100)
	if err != nil {
		t.Fatal(err)
	}

	// Node 1 creates the batch, starts it and submits item 0's job; it dies before recording the acceptance.
	sys1, lc1 := startSystem(t, store, store, clk)
	c1 := batchCaller{lc1}
	lc1.deps.Caller.Set(c1)
	id := batchstate.BatchIDFor(org.ID, "cancel-key")
	item := batchstate.ItemSpec{Filename: "a.png", Size: 100, Media: jobstate.MediaImage, WatermarkID: strings.Repeat("c", 64)}
	item2 := item
	item2.Filename = "b.png"
	c1.batch(t, id, &actors.BatchCreate{Spec: batchstate.Spec{BatchID: id, OrgID: org.ID, Source: batchstate.SourceUploads,
		Accelerator: jobstate.AcceleratorCPU, IdempotencyKey: "cancel-key", Items: []batchstate.ItemSpec{item, item2}}})
	sys1.Shutdown()
	rec, version, err := actors.Batches{Store: store}.Load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rec.Start(clk.Now()); err != nil {
		t.Fatal(err)
	}
	b, err := persistence.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CompareAndSet(ctx, []byte("batch/"+id), version, b); err != nil {
		t.Fatal(err)
	}
	sys2, lc2 := startSystem(t, store, store, clk)
	t.Cleanup(sys2.Shutdown)
	c2 := batchCaller{lc2}
	lc2.deps.Caller.Set(c2)
	job := rec.Items[0].RequestID
	lc2.job(t, job, &actors.JobSubmit{Spec: jobstate.Spec{RequestID: job, OrgID: org.ID, Operation: jobstate.OperationEmbed,
		Media: jobstate.MediaImage, Format: "PNG", FrameCount: 1, AcceleratorRequested: jobstate.AcceleratorCPU, BatchID: id,
		IdempotencyKey: batchstate.ItemIdempotencyKey(id, 0), WatermarkID: item.WatermarkID,
		Input: jobstate.Input{BlobKey: "inputs/" + org.ID + "/a", SHA256: strings.Repeat("a", 64), Size: 100, Filename: "a.png",
			ContentType: "image/png"}},
		Hold: 1, Slot: true, Batch: true})

	// The cancel reaches the batch on node 2.
	c2.batch(t, id, &actors.BatchCancel{BatchID: id, OrgID: org.ID})
	got := c2.batch(t, id, &actors.BatchGet{BatchID: id, OrgID: org.ID}).Record
	j := lc2.job(t, job, &actors.JobGet{RequestID: job, OrgID: org.ID}).Record
	st, _, err := adm.Balance(ctx, org.ID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !j.Status.Terminal() || st.Held() != 0 {
		t.Fatalf("item 0's job is %s with %d credits held after the batch was cancelled (item %s %q): it would run and be charged",
			j.Status, st.Held(), got.Items[0].Status, got.Items[0].ErrorCode)
	}
	if got.Status != batchstate.StatusCancelled || got.Items[0].Status != batchstate.ItemFailed || got.Items[0].ErrorCode != "cancelled" ||
		got.Items[1].Status != batchstate.ItemRejected {
		t.Fatalf("batch %s, items %+v", got.Status, got.Items)
	}
}
